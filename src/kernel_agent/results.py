"""What running one cell produced: :class:`CellResult` and :class:`CellError`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = ["CellError", "CellResult", "CellStatus", "strip_ansi"]

CellStatus = Literal["ok", "error", "timeout", "died"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor escapes."""
    return _ANSI.sub("", text)


@dataclass
class CellError:
    """An error raised by a cell, or a timeout or death reported by the session."""

    ename: str
    evalue: str
    traceback: list[str] = field(default_factory=list)

    @property
    def plain_traceback(self) -> str:
        """The traceback as one string without ANSI escapes."""
        return strip_ansi("\n".join(self.traceback))

    def __str__(self) -> str:
        return f"{self.ename}: {self.evalue}"


@dataclass
class CellResult:
    """The outcome of one ``execute`` call.

    ``outputs`` are nbformat output NotebookNodes, exactly what Jupyter would store.
    ``restarted`` is true when the session had to restart the kernel (after a
    timeout the interrupt did not stop, or after the kernel died); kernel state is
    then lost.
    """

    code: str
    status: CellStatus
    execution_count: int | None
    outputs: list[Any]
    error: CellError | None
    started: datetime
    ended: datetime
    restarted: bool = False
    #: results of ``user_expressions`` from the execute_reply (name -> mime bundle)
    user_expressions: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        """Wall time of the cell in seconds."""
        return (self.ended - self.started).total_seconds()

    @property
    def ok(self) -> bool:
        return self.status == "ok"
