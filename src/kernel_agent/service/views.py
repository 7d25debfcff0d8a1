"""Notebook files a session can be downloaded as: transcript, clean notebook, HTML."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..errors import ConfigError, NotFound
from .manager import SessionManager

__all__ = ["notebook_file", "live_html"]

_MEDIA = {"ipynb": "application/x-ipynb+json", "html": "text/html; charset=utf-8"}


async def notebook_file(
    manager: SessionManager, sid: str, fmt: str, clean: bool
) -> tuple[Path, str]:
    """(path, media type) of the session's notebook in ``fmt`` (ipynb or html)."""
    if fmt not in _MEDIA:
        raise ConfigError(f"format must be ipynb or html, not {fmt!r}")
    hosted = manager.get(sid)
    session = hosted.session
    if session is not None:
        source = session.write_clean() if clean else session.transcript.save()  # type: ignore[union-attr]
    else:
        source = hosted.clean_notebook if clean else hosted.notebook
    if not source.is_file():
        raise NotFound(f"session {sid} has no {'clean ' if clean else ''}notebook")
    if fmt == "ipynb":
        return source, _MEDIA[fmt]
    from ..notebook.export import export_notebook

    out = source.parent / "export" / f"{source.stem}.html"
    await asyncio.to_thread(export_notebook, source, "html", out)
    return out, _MEDIA[fmt]


_LIVE: dict[str, tuple[tuple[int, int], str]] = {}


async def live_html(manager: SessionManager, sid: str) -> str:
    """The session's transcript rendered by nbconvert, re-rendered only when it changed."""
    from ..notebook.export import export_notebook

    hosted = manager.get(sid)
    path = hosted.notebook
    if not path.is_file():
        return "<p>No notebook yet.</p>"
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _LIVE.get(sid)
    if cached is not None and cached[0] == key:
        return cached[1]
    out = path.parent / "export" / "live.html"
    await asyncio.to_thread(export_notebook, path, "html", out, provenance=False)
    html = out.read_text(encoding="utf-8")
    _LIVE[sid] = (key, html)
    return html
