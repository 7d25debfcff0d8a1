"""The ``.ipynb`` record of a run, rewritten atomically after every cell.

A crash at any moment leaves a valid notebook holding every finished cell: the file
is written to a temporary sibling and moved into place with ``os.replace``.
Serialisation matches ``nbformat.writes`` byte for byte, but each finished cell is
serialised once and cached, so the cost of a save grows with the bytes written,
not with re-encoding every earlier cell.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbformat.v4.rwbase import split_lines

from ..edges.safefs import file_mode
from ..errors import NotebookError
from ..results import CellResult
from .cellmeta import NAMESPACE, STATUS

__all__ = ["Transcript", "write_notebook_atomic"]

_JSON_KW: dict[str, Any] = {
    "indent": 1,
    "sort_keys": True,
    "separators": (",", ": "),
    "ensure_ascii": False,
}
_TRANSIENT = ("orig_nbformat", "orig_nbformat_minor", "signature")
_CELLS_PLACEHOLDER = '"__kernel_agent_cells__"'


def write_notebook_atomic(nb: NotebookNode, path: str | Path) -> None:
    """Write ``nb`` to ``path`` atomically (temp file in the same dir + ``os.replace``)."""
    _atomic_write_text(Path(path), nbformat.writes(nb))


def _new_file_mode() -> int:
    """The mode ``open()`` would give a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_NEW_FILE_MODE = _new_file_mode()


def _atomic_write_text(path: Path, text: str | list[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        # mkstemp makes 0600 files: keep an existing notebook's mode (of the file itself,
        # never a link's target, and without setuid/setgid/sticky), else the usual one
        mode = file_mode(path)
        if mode is None:
            mode = _NEW_FILE_MODE
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines([text] if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from None
        raise


def _cannot_write(path: Path, exc: OSError) -> NotebookError:
    return NotebookError(f"cannot write notebook {path}: {exc.strerror or exc}")


class Transcript:
    """A notebook file that grows cell by cell.

    ``kernelspec`` and ``language_info`` come from the running kernel (see
    :meth:`set_kernel`). Notebook-level run data goes under
    ``metadata["kernel_agent"]``; per-cell data under each cell's
    ``metadata["kernel_agent"]``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        kernelspec: Mapping[str, Any] | None = None,
        language_info: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        autosave: bool = True,
    ) -> None:
        self.path = Path(path)
        self.autosave = autosave
        self.nb = new_notebook()
        self.nb.metadata[NAMESPACE] = dict(metadata or {})
        # id(cell) -> (the cell's output data dicts when serialised, its JSON text)
        self._cache: dict[int, tuple[tuple[Any, ...], str]] = {}
        self._frozen: set[int] = set()
        if kernelspec or language_info:
            self.set_kernel(kernelspec or {}, language_info or {}, save=False)

    # ---------------------------------------------------------------- building
    @property
    def cells(self) -> list[NotebookNode]:
        return self.nb.cells

    @property
    def run_metadata(self) -> dict[str, Any]:
        return self.nb.metadata[NAMESPACE]

    def set_kernel(
        self, kernelspec: Mapping[str, Any], language_info: Mapping[str, Any], save: bool = True
    ) -> None:
        """Record the kernel the cells ran on (as JupyterLab and nbclient expect)."""
        if kernelspec:
            self.nb.metadata["kernelspec"] = {
                "name": kernelspec.get("name", ""),
                "display_name": kernelspec.get("display_name", kernelspec.get("name", "")),
                "language": kernelspec.get("language", language_info.get("name", "")),
            }
        if language_info:
            self.nb.metadata["language_info"] = dict(language_info)
        if save:
            self._autosave()

    def add_markdown(self, source: str, metadata: Mapping[str, Any] | None = None) -> NotebookNode:
        cell = new_markdown_cell(source)
        if metadata:
            cell.metadata[NAMESPACE] = dict(metadata)
        return self._append(cell)

    def add_code(
        self,
        code: str,
        result: CellResult | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        save: bool = True,
    ) -> NotebookNode:
        """Append a code cell; with ``result``, its outputs and execution count as produced.

        ``save=False`` leaves the writing to the caller (the next save writes it too).
        """
        cell = new_code_cell(code)
        if result is not None:
            cell.outputs = list(result.outputs)
            cell.execution_count = result.execution_count
        if metadata:
            cell.metadata[NAMESPACE] = dict(metadata)
        return self._append(cell, save)

    def finish_code(
        self,
        cell: NotebookNode,
        result: CellResult,
        metadata: Mapping[str, Any] | None = None,
    ) -> NotebookNode:
        """Fill a cell added (with its code) before it ran: outputs, count, metadata; save.

        Recording the code first keeps it in the notebook if the run ends mid-cell.
        The cell is frozen: its text is reused by later saves.
        """
        cell.outputs = list(result.outputs)
        cell.execution_count = result.execution_count
        if metadata:
            cell.metadata[NAMESPACE] = dict(metadata)
        self._cache.pop(id(cell), None)
        self._autosave()
        self.freeze(cell)
        return cell

    def mark(self, cell: NotebookNode, status: str) -> None:
        """Set a recorded cell's ``status`` (a cell the run ended in is ``interrupted``)."""
        cell.metadata.setdefault(NAMESPACE, {})[STATUS] = status
        self._cache.pop(id(cell), None)
        self._autosave()

    def update_run_metadata(self, **values: Any) -> None:
        self.run_metadata.update(values)
        self._autosave()

    def _append(self, cell: NotebookNode, save: bool = True) -> NotebookNode:
        self.nb.cells.append(cell)
        if save:
            self._autosave()
        return cell

    def _autosave(self) -> None:
        if self.autosave:
            self.save()

    # ------------------------------------------------------------------ saving
    def freeze(self, cell: NotebookNode) -> None:
        """Mark ``cell`` as final: it is serialised once and the text reused.

        Cells not frozen (the current one) are serialised on every save. A frozen
        cell whose display is later updated (``update_display_data``) is noticed and
        serialised again; other in-place edits of a frozen cell are not.
        """
        self._frozen.add(id(cell))

    def freeze_all(self) -> None:
        for cell in self.nb.cells:
            self.freeze(cell)

    def render(self) -> str:
        """The notebook as ``nbformat.writes`` would write it."""
        return "".join(self._render_parts())

    def _render_parts(self) -> list[str]:
        """The notebook's text in pieces (each cell's cached text is one): joined, it is
        :meth:`render`; written one by one, no second copy of the whole is made."""
        shell = {k: v for k, v in self.nb.items() if k not in ("cells", "metadata")}
        shell["metadata"] = {k: v for k, v in self.nb.metadata.items() if k not in _TRANSIENT}
        shell["cells"] = "__kernel_agent_cells__"
        head = json.dumps(shell, **_JSON_KW)
        if not self.nb.cells:
            return [head.replace(_CELLS_PLACEHOLDER, "[]")]
        alive = {id(c) for c in self.nb.cells}
        self._cache = {k: v for k, v in self._cache.items() if k in alive}
        before, after = head.split(_CELLS_PLACEHOLDER, 1)
        parts = [before, "[\n"]
        for index, cell in enumerate(self.nb.cells):
            parts.extend((",\n", self._cell_json(cell)) if index else (self._cell_json(cell),))
        parts.extend(("\n ]", after))
        return parts

    def _cell_json(self, cell: NotebookNode) -> str:
        key = id(cell)
        # A display update in a later cell replaces an output's data dict: compare the
        # dicts by identity (the cache holds them, so an id cannot be reused meanwhile).
        data = tuple(output.get("data") for output in cell.get("outputs", ()))
        cached = self._cache.get(key) if key in self._frozen else None
        if (
            cached is not None
            and len(cached[0]) == len(data)
            and all(old is new for old, new in zip(cached[0], data, strict=True))
        ):
            return cached[1]
        cell = copy.deepcopy(cell)
        cell.metadata.pop("trusted", None)
        text = json.dumps(split_lines(NotebookNode(cells=[cell])).cells[0], **_JSON_KW)
        text = "  " + text.replace("\n", "\n  ")
        if key in self._frozen:
            self._cache[key] = (data, text)
        return text

    def save(self) -> Path:
        """Write the notebook atomically; returns its path."""
        _atomic_write_text(self.path, self._render_parts())
        return self.path

    def validate(self) -> None:
        """Raise :class:`NotebookError` if the notebook is not valid nbformat."""
        try:
            nbformat.validate(nbformat.reads(self.render(), as_version=4))
        except nbformat.ValidationError as exc:
            raise NotebookError(f"invalid notebook {self.path}: {exc.message}") from None

    @classmethod
    def load(cls, path: str | Path, autosave: bool = True) -> Transcript:
        """Open an existing notebook to append to it."""
        path = Path(path)
        try:
            nb = nbformat.read(path, as_version=4)
        except OSError as exc:
            raise NotebookError(f"cannot read notebook {path}: {exc.strerror or exc}") from None
        except Exception as exc:  # nbformat raises ValueError, ValidationError, TypeError, ...
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise NotebookError(f"not a valid notebook {path}: {reason.splitlines()[0]}") from None
        transcript = cls(path, autosave=autosave)
        transcript.nb = nb
        nb.metadata.setdefault(NAMESPACE, {})
        return transcript
