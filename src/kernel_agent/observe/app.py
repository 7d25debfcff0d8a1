"""The ``kernel-agent observe`` web app: a read-only page over a notebooks directory.

Routes (GET only; anything else is 405):

- ``/``: the runs, newest first: task, model, status, cells, tokens, duration, verdict;
- ``/runs/NAME``: the run's summary, its timeline (model time against kernel time per
  step) and its rendered notebook beside it, with links to the clean notebook;
- ``/runs/NAME/html[?clean=1]``: the notebook rendered by nbconvert, with no scripts;
- ``/runs/NAME/ipynb[?clean=1]``: the notebook file itself.

A notebook's outputs were written by a model, so the rendered notebook is served with a
Content-Security-Policy that runs no script and loads nothing, inside a sandboxed
frame. Requests whose ``Host`` is not a loopback name are refused (DNS rebinding), and so
are cross-origin ones (:class:`~kernel_agent.edges.webguard.HostGuard`). A notebook whose
metadata has the wrong shapes is listed as "unreadable", never a 500.

Notebooks are read with :func:`~kernel_agent.observe.runs.read_bounded` (a regular file of
the directory itself, no link, at most ``MAX_NOTEBOOK_BYTES``) and rendered by nbconvert
in an unprivileged worker (:mod:`kernel_agent.notebook.worker`). The rendered pages are
kept in a :class:`RenderCache` bounded by count and bytes, one version per notebook.
"""

from __future__ import annotations

import asyncio
import html
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from ..edges.safefs import open_beneath
from ..edges.webguard import NOTEBOOK_CSP, HostGuard
from ..errors import TooLarge, UnsafePath
from .runs import Bar, RunInfo, list_runs, read_bounded, read_run, timeline

__all__ = ["create_app", "RenderCache"]

_PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "frame-src 'self'; base-uri 'none'; form-action 'none'"
)

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{background:#24292f;color:#fff;padding:8px 16px}header a{color:#fff;text-decoration:none}
main{padding:12px 16px}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;white-space:nowrap}
.ok{color:#1a7f37}.budget,.max_steps,.no_code,.stopped{color:#9a6700}
.failed,.error,.interrupted{color:#cf222e}
#cols{display:flex;gap:16px;align-items:flex-start}#left{flex:2;min-width:0}
#nb{flex:3;height:85vh;border:1px solid #ccc}
.wf{margin:8px 0}.wf .row{display:flex;align-items:center;height:20px;margin:2px 0}
.wf .label{width:70px;font:12px monospace;color:#555}
.wf .track{position:relative;flex:1;height:14px;background:#f6f8fa}
.wf .bar{position:absolute;top:0;height:14px;min-width:2px}
.model{background:#0969da}.kernel{background:#1a7f37}.kernel.error,.kernel.died,
.kernel.timeout{background:#cf222e}.kernel.skipped{background:#bbb}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;
vertical-align:middle}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 8px}
dt{color:#555}dd{margin:0}
"""


def _page(title: str, body: str) -> HTMLResponse:
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><header><a href='/'>kernel-agent observe</a> · "
        f"{html.escape(title)}</header><main>{body}</main></body></html>"
    )
    return HTMLResponse(page, headers={"Content-Security-Policy": _PAGE_CSP})


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"


def _split(run: RunInfo) -> str:
    if run.model_time_s is None or run.kernel_time_s is None:
        return _seconds(run.duration_s)
    return (
        f"{_seconds(run.duration_s)} (model {run.model_time_s:.1f} s, "
        f"kernel {run.kernel_time_s:.1f} s)"
    )


def _listing(directory: Path, runs: list[RunInfo]) -> str:
    if not runs:
        return f"<p>No kernel-agent runs in {html.escape(str(directory))}.</p>"
    rows = []
    for r in runs:
        e = html.escape
        tokens = f"{r.total_tokens:,}" if r.total_tokens is not None else ""
        if r.tokens.startswith("~"):
            tokens = "~" + tokens
        rows.append(
            f"<tr><td><a href='/runs/{quote(r.name)}'>{e(r.task[:120] or r.name)}</a></td>"
            f"<td>{e(r.model)}</td><td class='{e(r.status)}'>{e(r.status)}</td>"
            f"<td class='n'>{r.cells}</td><td class='n' title='{e(r.tokens)}'>{tokens}</td>"
            f"<td class='n'>{_seconds(r.duration_s)}</td><td>{e(r.verify) or '-'}</td>"
            f"<td>{e(r.started)}</td></tr>"
        )
    return (
        f"<p>{len(runs)} runs in {html.escape(str(directory))}</p><table><tr><th>Task</th>"
        "<th>Model</th><th>Status</th><th>Cells</th><th>Tokens</th><th>Duration</th>"
        "<th>Verify</th><th>Started</th></tr>" + "".join(rows) + "</table>"
    )


def _waterfall(bars: list[Bar]) -> str:
    if not bars:
        return "<p>No timings recorded.</p>"
    total = max(b.start + b.seconds for b in bars) or 1.0
    rows: list[tuple[str, list[Bar]]] = []
    for bar in bars:
        if rows and rows[-1][0] == bar.row and bar.kind == "kernel":
            rows[-1][1].append(bar)
        else:
            rows.append((bar.row, [bar]))
    out = []
    for label, group in rows:
        spans = "".join(
            f"<span class='bar {b.kind} {html.escape(b.status)}' "
            f"style='left:{100 * b.start / total:.3f}%;width:{100 * b.seconds / total:.3f}%' "
            f"title='{html.escape(_bar_title(b))}'></span>"
            for b in group
        )
        out.append(
            f"<div class='row'><span class='label'>{html.escape(label)}</span>"
            f"<div class='track'>{spans}</div></div>"
        )
    model = sum(b.seconds for b in bars if b.kind == "model")
    kernel = sum(b.seconds for b in bars if b.kind == "kernel")
    legend = (
        f"<div class='legend'><span class='model'></span>model {model:.2f} s"
        f"<span class='kernel'></span>kernel {kernel:.2f} s"
        f"<span class='kernel error'></span>failed cell · 0 to {total:.2f} s</div>"
    )
    return f"<div class='wf'>{''.join(out)}</div>{legend}"


def _bar_title(bar: Bar) -> str:
    text = f"{bar.row}: {bar.kind} {bar.seconds:.3f} s from {bar.start:.3f} s"
    if bar.status:
        text += f", {bar.status}"
    return f"{text} · {bar.note}" if bar.note else text


def _detail(run: RunInfo, nb: dict[str, Any], clean: bool) -> str:
    e = html.escape
    name = quote(run.name)
    facts = [
        ("Task", e(run.task)),
        ("Model", e(run.model)),
        ("Status", f"<span class='{e(run.status)}'>{e(run.status)}</span>"),
        ("Cells", str(run.cells)),
        ("Tokens", e(run.tokens) or "-"),
        ("Cost", f"${run.cost:.4f}" if run.cost is not None else "-"),
        ("Time", e(_split(run)) or "-"),
        ("Verify", e(run.verify) or "not verified"),
    ]
    if run.budget:
        limits = ", ".join(f"{k} {v:g}" for k, v in (run.budget.get("limits") or {}).items())
        stopped = run.budget.get("stopped_by")
        facts.append(("Budget", e(limits + (f"; stopped by {stopped}" if stopped else ""))))
    links = [f"<a href='/runs/{name}/ipynb'>transcript .ipynb</a>"]
    if run.clean is not None:
        links.insert(0, f"<a href='/runs/{name}?clean=1'>clean notebook</a>")
        links.append(f"<a href='/runs/{name}/ipynb?clean=1'>clean .ipynb</a>")
        if clean:
            links.insert(0, f"<a href='/runs/{name}'>full transcript</a>")
    facts.append(("Notebooks", " · ".join(links)))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    frame = f"/runs/{name}/html" + ("?clean=1" if clean else "")
    return (
        f"<div id='cols'><div id='left'><dl>{dl}</dl><h3>Timeline</h3>"
        f"{_waterfall(timeline(nb))}</div>"
        f"<iframe id='nb' sandbox src='{frame}' title='notebook'></iframe></div>"
    )


class RenderCache:
    """Rendered pages by (path, inode, size, mtime): least recently used out first, past
    ``entries`` pages or ``max_bytes`` characters; a new version of a notebook replaces
    its old one."""

    def __init__(self, entries: int = 16, max_bytes: int = 256 << 20) -> None:
        self.entries, self.max_bytes = entries, max_bytes
        self._pages: OrderedDict[tuple[str, int, int, int], str] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return sum(len(page) for page in self._pages.values())

    def get(self, key: tuple[str, int, int, int]) -> str | None:
        with self._lock:
            page = self._pages.get(key)
            if page is not None:
                self._pages.move_to_end(key)
            return page

    def put(self, key: tuple[str, int, int, int], page: str) -> None:
        with self._lock:
            for old in [k for k in self._pages if k[0] == key[0]]:
                del self._pages[old]  # one version per notebook
            if len(page) > self.max_bytes:
                return
            self._pages[key] = page
            total = self.size
            while len(self._pages) > self.entries or total > self.max_bytes:
                _, gone = self._pages.popitem(last=False)
                total -= len(gone)

    def __len__(self) -> int:
        return len(self._pages)


def _chunks(fd: int) -> Iterator[bytes]:
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(1 << 16):
            yield chunk


def _render(path: Path) -> str:
    """The notebook at ``path`` as HTML (bounded read, no link, nbconvert unprivileged)."""
    from ..errors import KernelAgentError
    from ..notebook.export import notebook_html
    from ..notebook.nbio import parse_notebook

    try:
        text = read_bounded(path).decode("utf-8")
        return notebook_html(path, nb=parse_notebook(text, path.name))
    except TooLarge as exc:
        return f"<p>This notebook is not shown: {html.escape(str(exc))}.</p>"
    except (KernelAgentError, OSError, ValueError) as exc:  # a notebook anyone wrote: no 500
        return f"<p>This notebook is unreadable: {html.escape(type(exc).__name__)}.</p>"


def create_app(directory: Path, cache: RenderCache | None = None) -> FastAPI:
    """The app over ``directory`` (read at each request: new runs appear on reload)."""
    directory = Path(directory).resolve()
    app = FastAPI(title="kernel-agent observe", docs_url=None, redoc_url=None, openapi_url=None)
    rendered = cache if cache is not None else RenderCache()
    rendering = asyncio.Lock()

    app.add_middleware(HostGuard, loopback_only=True, same_origin=True)

    def find(name: str, clean: bool = False) -> Path | None:
        """The run file ``name`` in the directory (never a path outside it)."""
        if "/" in name or "\\" in name or not name.endswith(".ipynb"):
            return None
        path = directory / name
        if clean:
            path = path.with_name(name[: -len(".ipynb")] + ".clean.ipynb")
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or path.parent != directory:
            return None  # a link, a device, a FIFO, a hard link to a file elsewhere
        return path

    def missing(name: str) -> HTMLResponse:
        response = _page("not found", f"<p>No run named {html.escape(name)}.</p>")
        response.status_code = 404
        return response

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        runs = await asyncio.to_thread(list_runs, directory)
        return _page("runs", _listing(directory, runs))

    @app.get("/runs/{name}", response_class=HTMLResponse)
    async def run_page(name: str, clean: bool = False) -> HTMLResponse:
        path = find(name)
        found = await asyncio.to_thread(read_run, path) if path else None
        if found is None:
            return missing(name)
        info, nb = found
        try:
            detail = _detail(info, nb, clean and bool(info.clean))
        except Exception:  # noqa: BLE001 - metadata of the wrong shape: show the notebook anyway
            detail = _detail(replace(info, budget={}), {}, clean and bool(info.clean))
        return _page(info.task[:80] or info.name, detail)

    @app.get("/runs/{name}/html", response_class=HTMLResponse)
    async def notebook_page(name: str, clean: bool = False) -> Response:
        path = find(name, clean)
        if path is None:
            return missing(name)
        try:
            st = os.lstat(path)
        except OSError:
            return missing(name)
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        async with rendering:  # a few at a time; the same page asked twice is made once
            page = rendered.get(key)
            if page is None:
                page = await asyncio.to_thread(_render, path)
                rendered.put(key, page)
        return HTMLResponse(page, headers={"Content-Security-Policy": NOTEBOOK_CSP})

    @app.get("/runs/{name}/ipynb")
    async def notebook_file(name: str, clean: bool = False) -> Response:
        path = find(name, clean)
        if path is None:
            return missing(name)
        try:  # the file itself, never through a link swapped in since find()
            fd = open_beneath(directory, path.name)
        except (OSError, UnsafePath):
            return missing(name)
        return StreamingResponse(
            _chunks(fd),
            media_type="application/x-ipynb+json",
            headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(path.name)}"},
        )

    return app
