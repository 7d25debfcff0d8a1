"""The clean notebook: only the cells that built the final state, as if run fresh.

A full transcript records everything the agent did: failed attempts, cells whose
state a kernel restart wiped, cells replayed to rebuild that state, skipped cells,
notes. :func:`clean_notebook` keeps

- the task cell(s) (markdown, role ``task``);
- every code cell that contributed to the final kernel state, in execution order,
  with its outputs, and the prose cells written just before it;
- the answer cell(s) (markdown, role ``answer``);

and renumbers execution counts 1..n so the notebook reads, and re-executes, as a
fresh top-to-bottom run.

How restarts are read: a code cell with ``restarted: true`` was followed by a
kernel restart, so every cell kept until then (that one included) lost its state.
Such a wiped cell comes back only if the agent replayed it (a later cell with
``replay: true`` and the same source). The replay is what is kept: it ran in the
fresh kernel that built the final state, so its outputs are the ones a
re-execution reproduces. A replay of a cell whose state was not lost is a
duplicate and is dropped. Cells without kernel-agent metadata (a notebook from
elsewhere) count as ``ok`` unless they hold an error output.

:func:`write_pair` writes the transcript and its clean notebook side by side,
each naming the other in ``metadata.kernel_agent`` (``clean_notebook`` and
``transcript``, paths relative to the notebook that holds them).
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from pathlib import Path
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import new_notebook

from . import cellmeta as M
from .nbio import validate_notebook
from .transcript import Transcript, write_notebook_atomic

__all__ = ["clean_notebook", "write_pair", "clean_path_for", "cell_status"]

#: Run-level keys that describe the transcript, not the clean notebook.
_TRANSCRIPT_ONLY = ("clean_notebook", "verify")


def cell_status(cell: NotebookNode) -> str:
    """The status kernel-agent recorded for a code cell (``ok`` if it recorded none)."""
    status = M.cell_meta(cell).get(M.STATUS)
    if status:
        return str(status)
    if any(out.get("output_type") == "error" for out in cell.get("outputs", [])):
        return "error"
    return "ok"


class _Kept:
    """A code cell on its way into the clean notebook, with its prose and origin."""

    __slots__ = ("cell", "prose", "index")

    def __init__(self, cell: NotebookNode, prose: list[NotebookNode], index: int) -> None:
        self.cell = cell
        self.prose = prose
        self.index = index


def clean_notebook(nb: NotebookNode | Transcript) -> NotebookNode:
    """The clean notebook of transcript ``nb`` (a NotebookNode or a ``Transcript``).

    The input is not modified. The result is valid nbformat with the same
    nbformat version, kernelspec and language_info.
    """
    nb = nb.nb if isinstance(nb, Transcript) else nb
    tasks: list[NotebookNode] = []
    answers: list[NotebookNode] = []
    prose: list[NotebookNode] = []
    live: list[_Kept] = []
    wiped: list[_Kept] = []
    dropped: Counter[str] = Counter()

    for index, cell in enumerate(nb.cells):
        meta = M.cell_meta(cell)
        if cell.cell_type == "markdown":
            role = meta.get(M.ROLE, M.ROLE_PROSE)
            if role == M.ROLE_TASK:
                tasks.append(cell)
            elif role == M.ROLE_ANSWER:
                answers.append(cell)
            elif role in (M.ROLE_NOTE, M.ROLE_BRIEFING):  # agent notes; the data preview
                dropped[role] += 1
            else:
                prose.append(cell)
            continue
        if cell.cell_type != "code":
            dropped["raw"] += 1
            continue
        mine, prose = prose, []
        entry = _Kept(cell, mine, index)
        status = cell_status(cell)
        if status != "ok":
            dropped[status] += 1
            dropped["prose"] += len(mine)
        elif meta.get(M.REPLAY):
            original = next((k for k in wiped if k.cell.source == cell.source), None)
            if original is not None:
                wiped.remove(original)
                dropped["superseded by replay"] += 1
                entry.prose = mine or original.prose
                dropped["prose"] += len(original.prose) if mine else 0
                live.append(entry)
            elif any(k.cell.source == cell.source for k in live):
                dropped["duplicate replay"] += 1
                dropped["prose"] += len(mine)
            else:
                live.append(entry)
        else:
            live.append(entry)
        if meta.get(M.RESTARTED):
            wiped.extend(live)
            live = []
    dropped["wiped"] += len(wiped)
    dropped["prose"] += len(prose) + sum(len(k.prose) for k in wiped)

    clean = new_notebook(metadata=_clean_metadata(nb.metadata))
    clean.nbformat, clean.nbformat_minor = nb.nbformat, nb.nbformat_minor
    clean.cells.extend(copy.deepcopy(c) for c in tasks)
    for number, kept in enumerate(live, start=1):
        clean.cells.extend(copy.deepcopy(c) for c in kept.prose)
        clean.cells.append(_renumbered(kept, number))
    clean.cells.extend(copy.deepcopy(c) for c in answers)
    clean.metadata[M.NAMESPACE]["clean"] = {
        "execution_counts": "renumbered 1..n as a fresh run",
        "transcript_cells": len(nb.cells),
        "code_cells": len(live),
        "dropped": {k: v for k, v in sorted(dropped.items()) if v},
    }
    return clean


def _clean_metadata(metadata: Any) -> NotebookNode:
    meta = copy.deepcopy(metadata)
    run = meta.get(M.NAMESPACE)
    run = dict(run) if isinstance(run, dict) else {}
    for key in _TRANSCRIPT_ONLY:
        run.pop(key, None)
    meta[M.NAMESPACE] = run
    return NotebookNode(meta)


def _renumbered(kept: _Kept, number: int) -> NotebookNode:
    cell = copy.deepcopy(kept.cell)
    meta = M.cell_meta(cell)
    meta["transcript_cell"] = kept.index
    if kept.cell.get("execution_count") is not None:
        meta["transcript_execution_count"] = kept.cell.execution_count
    cell.metadata[M.NAMESPACE] = meta
    cell.execution_count = number
    for output in cell.outputs:
        if output.get("output_type") == "execute_result":
            output["execution_count"] = number
    return cell


def clean_path_for(path: str | Path) -> Path:
    """``analysis.ipynb`` -> ``analysis.clean.ipynb`` (beside it)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.clean{path.suffix or '.ipynb'}")


def _link(target: Path, from_dir: Path) -> str:
    """``target`` relative to ``from_dir`` when possible, in POSIX form."""
    try:
        rel = os.path.relpath(target.resolve(), from_dir.resolve())
    except ValueError:  # another drive on Windows
        return target.resolve().as_posix()
    return Path(rel).as_posix()


def write_pair(
    transcript_nb: NotebookNode | Transcript, full_path: str | Path, clean_path: str | Path
) -> tuple[Path, Path]:
    """Write the full transcript and its clean notebook, each linked to the other.

    ``transcript_nb`` is the transcript's NotebookNode or a ``Transcript``; its
    run metadata gains ``clean_notebook``. The clean notebook is written first, so
    the link in the transcript never points at a missing file. Both are validated
    and written atomically. Returns ``(full_path, clean_path)``.
    """
    transcript = transcript_nb if isinstance(transcript_nb, Transcript) else None
    nb: NotebookNode = transcript_nb.nb if isinstance(transcript_nb, Transcript) else transcript_nb
    full_path, clean_path = Path(full_path), Path(clean_path)
    if full_path.resolve() == clean_path.resolve():
        from ..errors import ConfigError

        raise ConfigError(f"the clean notebook cannot overwrite its transcript: {full_path}")
    clean = clean_notebook(nb)
    nb.metadata.setdefault(M.NAMESPACE, {})["clean_notebook"] = _link(clean_path, full_path.parent)
    clean.metadata[M.NAMESPACE]["transcript"] = _link(full_path, clean_path.parent)
    validate_notebook(clean, clean_path)
    validate_notebook(nb, full_path)
    write_notebook_atomic(clean, clean_path)
    if transcript is not None and Path(transcript.path).resolve() == full_path.resolve():
        transcript.save()
    else:
        write_notebook_atomic(nb, full_path)
    return full_path, clean_path
