"""nbconvert's conversions, embedding only what the notebook was given.

These run in :mod:`kernel_agent.notebook.worker` (as an unprivileged uid when we are
root): they read a stranger's notebook and a kernel's outputs. What they embed:

- images the notebook holds: outputs (``image/*``) and cell attachments;
- a path in a **markdown cell** (``![](pic.png)``, ``<img src="pic.png">``) only when
  :func:`local_image` allows it: no scheme, an image extension, ``realpath`` inside the
  notebook's directory, reached with no link on the way (``O_NOFOLLOW`` at every step),
  a regular file with one link (no hard link to a file elsewhere), at most
  :data:`MAX_IMAGE_BYTES`, and readable by the process (the uid switch makes that
  "by every user" under root);
- nothing from disk for a kernel's ``text/markdown`` output: it is the kernel's text.

Anything else stays the reference it was (a broken image in the page), never an error;
a missing ``attachment:`` too. nbconvert's own ``embed_images`` option and renderer do
the work; only the file read (``_src_to_base64``) is replaced.
"""

from __future__ import annotations

import base64
import os
from typing import Any
from urllib.parse import urlsplit

from jinja2 import pass_context
from nbconvert import HTMLExporter, MarkdownExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbformat import NotebookNode

from ..edges.safefs import open_beneath
from ..errors import ExportError, UnsafePath, one_line

__all__ = ["to_html", "to_markdown", "to_pdf", "local_image", "MAX_IMAGE_BYTES"]

#: The largest file a markdown cell's image reference may embed, and all of them together.
MAX_IMAGE_BYTES = 10 << 20
MAX_EMBEDDED_BYTES = 64 << 20
_IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}


def local_image(directory: str, src: str, *, limit: int = MAX_IMAGE_BYTES) -> str | None:
    """A ``data:`` URL for image file ``src`` of the notebook in ``directory``, or None.

    None (the reference stays as it is) unless: ``src`` has no scheme, host, query or
    fragment; the file it resolves to (``realpath``) is inside ``directory``; it is
    reached from there with no link on the way; it is a regular file with one link and
    an image extension, of at most ``limit`` bytes; and this process may read it.
    """
    if not directory or not src or "\0" in src or len(src) > 4096:
        return None
    parts = urlsplit(src)
    if parts.scheme or parts.netloc or parts.query or parts.fragment or src.startswith("/"):
        return None
    root = os.path.realpath(directory)
    real = os.path.realpath(os.path.join(root, src))
    rel = os.path.relpath(real, root)
    if rel == "." or rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
        return None
    mime = _IMAGE_TYPES.get(os.path.splitext(real)[1].lower())
    if mime is None:
        return None
    try:
        fd = open_beneath(root, rel)  # O_NOFOLLOW at every step: a link swapped in is refused
    except (OSError, UnsafePath):
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_nlink != 1 or st.st_size > limit:
            return None
        data = fh.read(limit + 1)
    if len(data) > limit:
        return None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


class _Renderer(IPythonRenderer):
    """nbconvert's renderer, reading files only through :func:`local_image`."""

    def __init__(self, budget: list[int], **kw: Any) -> None:
        super().__init__(**kw)
        self._budget = budget

    def _src_to_base64(self, src: str) -> str | None:
        left = self._budget[0]
        url = local_image(self.path, src, limit=min(MAX_IMAGE_BYTES, left))
        if url is not None:
            self._budget[0] = left - len(url) * 3 // 4
        return url

    def _embed_image_or_attachment(self, src: str) -> str:
        name = src[len("attachment:") :] if src.startswith("attachment:") else None
        if name is not None and name not in self.attachments:
            return src  # a broken reference, not an error
        return str(super()._embed_image_or_attachment(src))


class _HTML(HTMLExporter):
    """HTMLExporter whose markdown filter embeds files for markdown cells only."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._budget = [MAX_EMBEDDED_BYTES]

    @pass_context
    def markdown2html(self, context: Any, source: str) -> str:
        cell = context.get("cell", {}) or {}
        markdown_cell = cell.get("cell_type") == "markdown"
        path = context.get("resources", {}).get("metadata", {}).get("path", "")
        renderer = _Renderer(
            self._budget,
            escape=False,
            attachments=cell.get("attachments", {}) if markdown_cell else {},
            embed_images=self.embed_images and markdown_cell,  # never for a kernel's output
            path=path,
            anchor_link_text=self.anchor_link_text,
            exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options,
        )
        return str(MarkdownWithMath(renderer=renderer).render(source))


def _resources(directory: str, name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "path": directory}}


def to_html(nb: NotebookNode, directory: str, name: str) -> str:
    """The notebook as one self-contained HTML page (lab template)."""
    exporter = _HTML(template_name="lab", embed_images=True)
    try:
        body, resources = exporter.from_notebook_node(nb, resources=_resources(directory, name))
    except Exception as exc:  # a stranger's notebook: nbconvert may raise anything
        raise ExportError(f"HTML export of {name} failed: {one_line(exc, 300)}") from None
    if resources.get("outputs"):  # nothing may live outside the file
        raise ExportError(f"HTML export of {name} produced external files")
    return str(body)


def to_markdown(
    nb: NotebookNode, directory: str, name: str, files_dir: str, key: str
) -> tuple[str, dict[str, bytes]]:
    """The notebook as Markdown, and its output images by the names the text uses."""
    resources = _resources(directory, name)
    resources.update(output_files_dir=files_dir, unique_key=key)
    try:
        body, resources = MarkdownExporter().from_notebook_node(nb, resources=resources)
    except Exception as exc:
        raise ExportError(f"Markdown export of {name} failed: {one_line(exc, 300)}") from None
    return str(body), dict(resources.get("outputs") or {})


def to_pdf(nb: NotebookNode, directory: str, name: str, engine: str) -> bytes:
    """The notebook as PDF through nbconvert's ``webpdf`` or LaTeX exporter."""
    from nbconvert import PDFExporter, WebPDFExporter

    exporter = WebPDFExporter() if engine == "webpdf" else PDFExporter()
    try:
        data, _ = exporter.from_notebook_node(nb, resources=_resources(directory, name))
    except Exception as exc:
        raise ExportError(f"PDF export with {engine} failed: {one_line(exc)}") from None
    return bytes(data)
