"""The runs in a notebooks directory, read from the metadata kernel-agent writes. Pure reading.

A run is a transcript (``NAME.ipynb``, not ``NAME.clean.ipynb``) whose notebook metadata
has a ``kernel_agent`` section. :func:`list_runs` reads them as plain JSON (no
validation: a directory of many notebooks lists quickly); :func:`timeline` turns the
per-cell metadata (``gen_s``: the model's time for the reply that asked for the cell,
``exec_s``: the kernel's time) into a waterfall of bars.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import tokens_text
from ..notebook.cellmeta import (
    EXEC_S,
    GEN_S,
    NAMESPACE,
    REPLAY,
    SKIPPED,
    STATUS,
    STEP,
    TOKENS,
    cell_meta,
)

__all__ = ["Bar", "RunInfo", "list_runs", "read_run", "timeline"]

_CLEAN = ".clean.ipynb"


@dataclass
class RunInfo:
    """One run as the listing shows it."""

    name: str  # the file name, the run's id in URLs
    path: Path
    task: str = ""
    model: str = ""
    status: str = ""
    cells: int = 0
    tokens: str = ""
    total_tokens: int | None = None
    duration_s: float | None = None
    model_time_s: float | None = None
    kernel_time_s: float | None = None
    cost: float | None = None
    verify: str = ""
    started: str = ""
    clean: Path | None = None
    budget: dict[str, Any] = field(default_factory=dict)


@dataclass
class Bar:
    """One bar of the waterfall: ``kind`` is "model" or "kernel"; times in seconds."""

    row: str  # the row's label ("step 3", "answer")
    kind: str
    start: float
    seconds: float
    status: str = ""
    note: str = ""


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _count(value: Any) -> int | None:
    """A token count from metadata anyone may have written: an int, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(value: Any) -> dict[str, Any]:
    """The ``usage`` metadata with only well-typed fields (counts are ints, source a str)."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if _count(value.get(key)) is not None:
            out[key] = value[key]
    if isinstance(value.get("source"), str):
        out["source"] = value["source"]
    if isinstance(value.get("reported"), bool):
        out["reported"] = value["reported"]
    return out


def _budget(value: Any) -> dict[str, Any]:
    """The ``budget`` metadata with ``limits`` a dict of numbers and ``stopped_by`` a str."""
    if not isinstance(value, dict):
        return {}
    limits = value.get("limits")
    out: dict[str, Any] = {
        "limits": {
            str(k): v
            for k, v in (limits.items() if isinstance(limits, dict) else ())
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
    }
    if isinstance(value.get("stopped_by"), str):
        out["stopped_by"] = value["stopped_by"]
    return out if out["limits"] or "stopped_by" in out else {}


def _unreadable(path: Path, why: str) -> RunInfo:
    return RunInfo(name=path.name, path=path, task=f"(unreadable: {why})", status="unreadable")


def _info(path: Path, nb: dict[str, Any]) -> RunInfo | None:
    metadata = nb.get("metadata")
    run = metadata.get(NAMESPACE) if isinstance(metadata, dict) else None
    if not isinstance(run, dict):
        return None
    code = [c for c in _cells(nb) if c.get("cell_type") == "code" and not cell_meta(c).get(REPLAY)]
    usage = _usage(run.get("usage"))
    verify: dict[str, Any] = run["verify"] if isinstance(run.get("verify"), dict) else {}
    budget = _budget(run.get("budget"))
    clean = path.with_name(path.name[: -len(".ipynb")] + _CLEAN)

    def number(key: str) -> float | None:
        value = run.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    return RunInfo(
        name=path.name,
        path=path,
        task=str(run.get("task") or ""),
        model=str(run.get("model") or ""),
        status=str(run.get("status") or "running"),
        cells=len(code),
        tokens=tokens_text(usage) if usage else "",
        total_tokens=usage.get("total_tokens"),
        duration_s=number("duration_s"),
        model_time_s=number("model_time_s"),
        kernel_time_s=number("kernel_time_s"),
        cost=number("cost"),
        verify=str(verify.get("verdict") or ""),
        started=str(run.get("started") or ""),
        clean=clean if clean.is_file() else None,
        budget=budget,
    )


def _cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    cells = nb.get("cells")
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def list_runs(directory: Path) -> list[RunInfo]:
    """The runs in ``directory`` (not below it), newest first. A notebook that cannot be
    read as a run (not JSON, shapes no writer makes) is listed as "unreadable"."""
    runs = []
    for path in sorted(directory.glob("*.ipynb")):
        if path.name.endswith(_CLEAN) or not path.is_file():
            continue
        nb = _read_json(path)
        if nb is None:
            runs.append(_unreadable(path, "not a JSON notebook"))
            continue
        try:
            info = _info(path, nb)
        except Exception as exc:  # noqa: BLE001 - one odd notebook never hides the others
            info = _unreadable(path, type(exc).__name__)
        if info is not None:
            runs.append(info)
    runs.sort(key=lambda r: (r.started, r.name), reverse=True)
    return runs


def read_run(path: Path) -> tuple[RunInfo, dict[str, Any]] | None:
    """A run's summary and its notebook as JSON, or None if it is not a run."""
    nb = _read_json(path)
    if nb is None:
        return _unreadable(path, "not a JSON notebook"), {}
    try:
        info = _info(path, nb)
    except Exception as exc:  # noqa: BLE001 - shapes no writer makes: say so
        return _unreadable(path, type(exc).__name__), {}
    return (info, nb) if info is not None else None


def timeline(nb: dict[str, Any]) -> list[Bar]:
    """The waterfall: for each step the model's time, then the kernel's, one after another.

    Model time spent on replies that ran no cell (the answer, nudges) is the run's
    ``model_time_s`` less the cells' ``gen_s``; it ends the waterfall as "answer".
    """
    bars: list[Bar] = []
    t = 0.0
    model_total = 0.0
    for cell in _cells(nb):
        meta = cell_meta(cell)
        if cell.get("cell_type") != "code" or not meta:
            continue
        status = str(meta.get(STATUS) or "")
        row = "replay" if meta.get(REPLAY) else f"step {meta.get(STEP, '?')}"
        gen = meta.get(GEN_S)
        if isinstance(gen, (int, float)) and gen > 0:
            tokens = meta.get(TOKENS)
            count = _count(tokens.get("total_tokens")) if isinstance(tokens, dict) else None
            note = f"{count:,} tokens" if count is not None else ""
            bars.append(Bar(row, "model", t, float(gen), note=note))
            t += float(gen)
            model_total += float(gen)
        exec_s = meta.get(EXEC_S)
        if isinstance(exec_s, (int, float)):
            source = cell.get("source") or ""  # on disk, a string or a list of lines
            if isinstance(source, list):
                source = "".join(line for line in source if isinstance(line, str))
            first = source.strip().splitlines() if isinstance(source, str) else []
            bars.append(
                Bar(row, "kernel", t, float(exec_s), status, first[0][:80] if first else "")
            )
            t += float(exec_s)
        elif status == SKIPPED:
            bars.append(Bar(row, "kernel", t, 0.0, status, "skipped"))
    metadata = nb.get("metadata")
    run = metadata.get(NAMESPACE) if isinstance(metadata, dict) else None
    rest = run.get("model_time_s") if isinstance(run, dict) else None
    if isinstance(rest, (int, float)) and rest - model_total > 0.0005:
        bars.append(Bar("answer", "model", t, float(rest) - model_total))
    return bars
