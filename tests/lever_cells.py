"""Cell results as a lever sees them, for the levers' pure tests: one that printed, one that
failed."""

from __future__ import annotations

from datetime import datetime, timezone

from nbformat.v4 import new_output

from kernel_agent.results import CellError, CellResult

NOW = datetime.now(timezone.utc)


def ok(code: str, printed: str = "") -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def failed(
    code: str, ename: str = "NameError", evalue: str = "name 'x' is not defined"
) -> CellResult:
    return CellResult(code, "error", 1, [], CellError(ename, evalue, []), NOW, NOW)
