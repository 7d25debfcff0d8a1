"""Export a notebook to HTML, Markdown or PDF, with where it came from on top.

nbconvert runs in :mod:`kernel_agent.notebook.worker`: as root, in a process of a leased
unprivileged uid that is handed the notebook's JSON and can read no private file. What
it embeds is what the notebook holds (outputs, attachments), and a markdown cell's
image file only under the rules of :mod:`kernel_agent.notebook.convert`.

- **html**: one self-contained file. Output images are ``data:`` URIs and
  images referenced from markdown cells are inlined when those rules allow (else left
  as a reference), so nothing is written beside it. (The page still names the CDN
  scripts nbconvert's template uses for MathJax and require.js; without a network they
  just do not load.)
- **markdown**: ``NAME.md`` plus its images as files in ``NAME_md_files/`` beside it
  (data URIs are stripped by most Markdown renderers, GitHub's among them). Not
  ``NAME_files/``: that is where a run keeps its images, ``work/`` and ``result/``.
- **pdf**: the HTML export printed by headless Chromium when it is installed (as an
  unprivileged uid in Chromium's sandbox, with no script, no network and no file
  access: see :mod:`kernel_agent.notebook.chromium`); else
  nbconvert's ``webpdf`` when playwright is importable; else LaTeX when ``xelatex``
  and ``pandoc`` are on PATH; else :class:`~kernel_agent.errors.ExportError`
  saying what is missing.

Every format starts with a provenance header, built from ``metadata.kernel_agent``
(task, model, tokens, times, kernel, sandbox, verify verdict, which notebook of the
pair this is); a notebook without that metadata is exported as it is.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import html as html_lib
import importlib.util
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell

from ..edges.safefs import remove_beneath, write_beneath
from ..errors import ConfigError, ExportError, UnsafePath
from ..events import tokens_text
from . import cellmeta as M
from . import worker
from .nbio import read_notebook
from .transcript import _atomic_write_text

__all__ = [
    "export_notebook",
    "notebook_html",
    "provenance_markdown",
    "with_provenance",
    "pdf_engine",
    "FORMATS",
]

Format = Literal["html", "markdown", "pdf"]
FORMATS: dict[str, str] = {"html": ".html", "markdown": ".md", "pdf": ".pdf"}
_ALIASES = {"md": "markdown", "htm": "html"}
PdfEngine = Literal["auto", "chromium", "webpdf", "latex"]


def export_notebook(
    path: str | Path,
    to: str = "html",
    output: str | Path | None = None,
    *,
    provenance: bool = True,
    pdf_engine: PdfEngine = "auto",
) -> Path:
    """Export the notebook at ``path``; returns the written file.

    ``output`` defaults to ``path`` with the format's suffix; a directory (an
    existing one, or a path ending in ``/``) means "in there, named after the
    notebook".
    """
    path = Path(path)
    fmt = _ALIASES.get(to, to)
    if fmt not in FORMATS:
        raise ConfigError(f"cannot export to {to!r}: choose html, markdown or pdf")
    nb = read_notebook(path)
    out = Path(output) if output is not None else path.with_suffix(FORMATS[fmt])
    if out.is_dir() or str(output or "").endswith(("/", os.sep)):
        out = out / (path.stem + FORMATS[fmt])
    if out.resolve() == path.resolve():
        raise ConfigError(f"export would overwrite the notebook itself: {out}")
    if provenance:
        nb = with_provenance(nb, path)
    if fmt == "html":
        _atomic_write_text(out, _html(nb, path))
    elif fmt == "markdown":
        _markdown(nb, path, out)
    else:
        _pdf(nb, path, out, pdf_engine)
    return out


def notebook_html(
    path: str | Path, *, provenance: bool = True, nb: NotebookNode | None = None
) -> str:
    """The notebook at ``path`` as one self-contained HTML page (what ``to="html"`` writes).

    ``nb`` is the notebook when the caller read it (with its own bounds); else it is read.
    """
    path = Path(path)
    nb = read_notebook(path) if nb is None else nb
    return _html(with_provenance(nb, path) if provenance else nb, path)


# ------------------------------------------------------------------ formats
def _request(nb: NotebookNode, nb_path: Path, **more: Any) -> dict[str, Any]:
    """What the worker is handed: the notebook's JSON and where it lives (no file)."""
    return {"nb": nb, "dir": str(nb_path.resolve().parent), "name": nb_path.stem, **more}


def _html(nb: NotebookNode, nb_path: Path) -> str:
    return str(worker.call("html", _request(nb, nb_path)))


def _markdown(nb: NotebookNode, nb_path: Path, out: Path) -> None:
    # not NAME_files/: a run's own files (its images, work/ and result/) live there
    files_dir = f"{out.stem}_md_files"
    answer = worker.call("markdown", _request(nb, nb_path, files_dir=files_dir, key=out.stem))
    outputs = {str(k): base64.b64decode(v) for k, v in dict(answer["outputs"]).items()}
    _remove_earlier_images(out.parent, files_dir, out.stem)
    for name, data in outputs.items():
        write_beneath(out.parent, name, data)  # names come from the notebook: no links, no ..
    _atomic_write_text(out, str(answer["body"]))


def _remove_earlier_images(parent: Path, files_dir: str, stem: str) -> None:
    """Remove the images an earlier export of ``stem`` wrote (nbconvert's names), nothing else."""
    ours = re.compile(re.escape(stem) + r"_\d+_\d+\.[A-Za-z0-9]+")
    try:
        names = os.listdir(parent / files_dir)
    except OSError:
        return
    for name in names:
        if ours.fullmatch(name):
            with contextlib.suppress(OSError, UnsafePath):
                remove_beneath(parent, f"{files_dir}/{name}")  # a link is removed, never followed


def pdf_engine(preferred: PdfEngine = "auto") -> str | None:
    """The PDF toolchain to use, or None when ``preferred`` (or every one) is missing."""
    from .chromium import find_chromium

    available = {
        "chromium": lambda: find_chromium() is not None,
        "webpdf": _has_playwright,
        "latex": lambda: bool(shutil.which("xelatex") and shutil.which("pandoc")),
    }
    order = list(available) if preferred == "auto" else [preferred]
    return next((name for name in order if available[name]()), None)


def _has_playwright() -> bool:
    try:
        return importlib.util.find_spec("playwright") is not None
    except (ImportError, ValueError):
        return False


def _pdf(nb: NotebookNode, nb_path: Path, out: Path, preferred: PdfEngine) -> None:
    engine = pdf_engine(preferred)
    if engine is None:
        if preferred != "auto":
            raise ExportError(
                f"PDF export with {preferred} is not possible here: {_MISSING[preferred]}"
            )
        raise ExportError(
            "PDF export needs Chromium (apt-get install chromium), playwright, "
            "or xelatex and pandoc; none was found"
        )
    if engine == "chromium":  # unprivileged, sandboxed, no file://, no script, no network
        from .chromium import render_pdf

        data = render_pdf(_html(nb, nb_path)).data
        out.parent.mkdir(parents=True, exist_ok=True)
        write_beneath(out.parent, out.name, data)
        return
    data = base64.b64decode(worker.call("pdf", _request(nb, nb_path, engine=engine)))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_beneath(out.parent, out.name, data)


_MISSING = {
    "chromium": "Chromium is not installed (apt-get install chromium)",
    "webpdf": "playwright is not installed (pip install 'nbconvert[webpdf]')",
    "latex": "xelatex and pandoc are needed (apt-get install texlive-xetex pandoc)",
}


# --------------------------------------------------------------- provenance
def with_provenance(nb: NotebookNode, nb_path: Path | None = None) -> NotebookNode:
    """A copy of ``nb`` with the provenance header as its first cell (if it has any)."""
    text = provenance_markdown(nb, nb_path)
    if text is None:
        return nb
    nb = copy.deepcopy(nb)
    cell = new_markdown_cell(text)
    cell.metadata[M.NAMESPACE] = {M.ROLE: M.ROLE_PROVENANCE}
    if nb.nbformat_minor < 5:
        del cell["id"]
    nb.cells.insert(0, cell)
    return nb


def provenance_markdown(nb: NotebookNode, nb_path: Path | None = None) -> str | None:
    """The provenance header as Markdown, or None for a notebook kernel-agent did not make."""
    run = M.run_meta(nb.metadata)  # every field of its type, or left out
    if not run:
        return None
    rows: list[tuple[str, str]] = []
    if run.get("task"):
        rows.append(("Task", str(run["task"])))
    if run.get("model"):
        rows.append(("Model", str(run["model"])))
    if run.get("status"):
        rows.append(("Run status", str(run["status"])))
    usage = run.get("usage") or {}
    if usage:
        rows.append(("Tokens", tokens_text(usage)))
    if isinstance(run.get("cost"), (int, float)):
        rows.append(("Cost", f"${run['cost']:.4f} (at the model's price per million tokens)"))
    times = [run.get(k) for k in ("model_time_s", "kernel_time_s")]
    if all(isinstance(t, (int, float)) for t in times):
        rows.append(("Time", f"model {times[0]:.1f} s, kernel {times[1]:.1f} s"))
    if run.get("budget"):
        rows.append(("Budget", _budget_text(run["budget"])))
    if run.get("started"):
        rows.append(("Started", str(run["started"])))
    if run.get("ended"):
        ended = str(run["ended"])
        if isinstance(run.get("duration_s"), (int, float)):
            ended += f" ({run['duration_s']:.1f} s)"
        rows.append(("Ended", ended))
    kernel = nb.metadata.get("kernelspec") or {}
    if kernel:
        rows.append(("Kernel", str(kernel.get("display_name") or kernel.get("name"))))
    if run.get("sandbox"):
        rows.append(("Sandbox", _flat(run["sandbox"])))
    rows.append(("Verify", _verify_text(run.get("verify"))))
    if run.get("transcript"):
        rows.append(
            (
                "Notebook",
                f"clean (execution counts renumbered); full transcript: {run['transcript']}",
            )
        )
    elif run.get("clean_notebook"):
        rows.append(("Notebook", f"full transcript; clean notebook: {run['clean_notebook']}"))
    from ..version import __version__

    exported = datetime.now(timezone.utc).isoformat(timespec="seconds")
    source = f" from {nb_path.name}" if nb_path is not None else ""
    rows.append(("Exported", f"{exported}{source} by kernel-agent {__version__}"))
    lines = ["**kernel-agent run: provenance**", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {_escape(value)} |" for name, value in rows]
    return "\n".join(lines)


def _budget_text(budget: dict[str, Any]) -> str:
    limits = ", ".join(f"{k} {v:g}" for k, v in (budget.get("limits") or {}).items())
    used = ", ".join(f"{k} {v:g}" for k, v in (budget.get("used") or {}).items())
    text = f"limits: {limits or 'none'}; used: {used}"
    if budget.get("stopped_by"):
        text += f"; stopped by {budget['stopped_by']}"
    return text


def _verify_text(verify: Any) -> str:
    if not isinstance(verify, dict) or not verify.get("verdict"):
        return "not verified"
    text = str(verify["verdict"])
    if verify.get("code_cells") is not None:
        text += f" ({verify.get('reproduced_cells', '?')}/{verify['code_cells']} code cells"
        text += f", checked {verify['checked']})" if verify.get("checked") else ")"
    first = verify.get("first_difference")
    if isinstance(first, dict) and first.get("problems"):
        text += f"; first difference in code cell {first.get('code_cell')}: {first['problems'][0]}"
    if verify.get("error"):
        text += f"; {verify['error']}"
    return text


def _flat(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items() if not isinstance(v, (dict, list)))


def _escape(value: str) -> str:
    return html_lib.escape(" ".join(str(value).split())).replace("|", "&#124;")
