"""The runs in a notebooks directory, read from the metadata kernel-agent writes. Pure reading.

A run is a transcript (``NAME.ipynb``, not ``NAME.clean.ipynb``) whose notebook metadata
has a ``kernel_agent`` section. :func:`list_runs` reads them as plain JSON (no
validation: a directory of many notebooks lists quickly); :func:`timeline` turns the
per-cell metadata (``gen_s``: the model's time for the reply that asked for the cell,
``exec_s``: the kernel's time) into a waterfall of bars.

The directory may hold anyone's files. A notebook is read only as a regular file directly
in it, opened without following a link (``O_NOFOLLOW``, beneath the directory's fd: a
link is not listed, whatever it points at, nor a file with a second name elsewhere), and
only up to :data:`MAX_NOTEBOOK_BYTES` (a larger one is listed as "unreadable" from its
``stat``, never read). The listing keeps what it read by (path, inode, size, mtime) in a
bounded cache, so a reload re-reads only what changed. The run's metadata is read through
:func:`~kernel_agent.notebook.cellmeta.run_meta`: every field of its type, or left out.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..edges.safefs import open_beneath
from ..errors import TooLarge, UnsafePath
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
    run_meta,
)

__all__ = [
    "Bar",
    "RunInfo",
    "list_runs",
    "read_run",
    "read_bounded",
    "timeline",
    "MAX_NOTEBOOK_BYTES",
]

_CLEAN = ".clean.ipynb"
#: the largest notebook observe reads (the size a run's own notebook is bounded to)
MAX_NOTEBOOK_BYTES = 100 << 20
#: how many notebooks' summaries the listing keeps between requests
_LISTED = 4096


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


def read_bounded(path: Path, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of regular file ``path`` (never through a link), at most ``limit``.

    :class:`~kernel_agent.errors.TooLarge` past ``limit`` (known from ``fstat``, before any
    read); ``OSError``/:class:`~kernel_agent.errors.UnsafePath` for a link, a FIFO, a
    device, or a file with another name elsewhere (a hard link: it may be anyone's file).
    """
    fd = open_beneath(path.parent, path.name)  # O_NOFOLLOW, O_NONBLOCK, S_ISREG
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_nlink != 1:
            raise UnsafePath(f"{path.name} has {st.st_nlink} links (a file from elsewhere?)")
        if st.st_size > limit:
            raise TooLarge(f"over {limit >> 20} MB")
        data = fh.read(limit + 1)  # it may have grown since
    if len(data) > limit:
        raise TooLarge(f"over {limit >> 20} MB")
    return data


def _read_json(path: Path) -> dict[str, Any] | str:
    """The notebook's JSON, or why it cannot be read."""
    try:
        data = json.loads(read_bounded(path))
    except TooLarge as exc:
        return str(exc)
    except (OSError, UnsafePath, ValueError, UnicodeDecodeError, RecursionError):
        return "not a JSON notebook"
    return data if isinstance(data, dict) else "not a JSON notebook"


def _count(value: Any) -> int | None:
    """A token count from metadata anyone may have written: an int, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unreadable(path: Path, why: str) -> RunInfo:
    return RunInfo(name=path.name, path=path, task=f"(unreadable: {why})", status="unreadable")


def _info(path: Path, nb: dict[str, Any]) -> RunInfo | None:
    metadata = nb.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get(NAMESPACE), dict):
        return None
    run = run_meta(metadata)  # every field of its type (cellmeta's one reader)
    code = [c for c in _cells(nb) if c.get("cell_type") == "code" and not cell_meta(c).get(REPLAY)]
    usage = run.get("usage") or {}
    budget = run.get("budget") or {}
    clean = path.with_name(path.name[: -len(".ipynb")] + _CLEAN)

    def number(key: str) -> float | None:
        value = run.get(key)
        return float(value) if value is not None else None

    return RunInfo(
        name=path.name,
        path=path,
        task=run.get("task", ""),
        model=run.get("model", ""),
        status=run.get("status") or "running",
        cells=len(code),
        tokens=tokens_text(usage) if usage else "",
        total_tokens=usage.get("total_tokens"),
        duration_s=number("duration_s"),
        model_time_s=number("model_time_s"),
        kernel_time_s=number("kernel_time_s"),
        cost=number("cost"),
        verify=(run.get("verify") or {}).get("verdict", ""),
        started=run.get("started", ""),
        clean=clean if _regular(clean) else None,
        budget=budget if budget.get("limits") or "stopped_by" in budget else {},
    )


def _regular(path: Path) -> bool:
    """A regular file itself (a link to one is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    cells = nb.get("cells")
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


_listed: OrderedDict[tuple[Any, ...], RunInfo | None] = OrderedDict()
_listing = threading.Lock()  # one listing at a time: concurrent loads wait, then hit the cache


def list_runs(directory: Path) -> list[RunInfo]:
    """The runs in ``directory`` (not below it), newest first. A notebook that cannot be
    read as a run (not JSON, shapes no writer makes, too large) is listed as "unreadable";
    links and anything not a regular file are not listed."""
    with _listing:
        runs = [info for info in map(_summary, _candidates(directory)) if info is not None]
    runs.sort(key=lambda r: (r.started, r.name), reverse=True)
    return runs


def _candidates(directory: Path) -> list[tuple[Path, os.stat_result]]:
    out = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.endswith(".ipynb") or entry.name.endswith(_CLEAN):
                continue
            try:
                st = entry.stat(follow_symlinks=False)  # a link is a link, never its target
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                out.append((directory / entry.name, st))
    return sorted(out)


def _summary(found: tuple[Path, os.stat_result]) -> RunInfo | None:
    path, st = found
    clean = path.with_name(path.name[: -len(".ipynb")] + _CLEAN)
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, _regular(clean))
    if key in _listed:
        _listed.move_to_end(key)
        return _listed[key]
    nb = _read_json(path)
    if isinstance(nb, str):
        info: RunInfo | None = _unreadable(path, nb)
    else:
        try:
            info = _info(path, nb)
        except Exception as exc:  # noqa: BLE001 - one odd notebook never hides the others
            info = _unreadable(path, type(exc).__name__)
    _listed[key] = info
    while len(_listed) > _LISTED:
        _listed.popitem(last=False)
    return info


def read_run(path: Path) -> tuple[RunInfo, dict[str, Any]] | None:
    """A run's summary and its notebook as JSON, or None if it is not a run."""
    nb = _read_json(path)
    if isinstance(nb, str):
        return _unreadable(path, nb), {}
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
