"""What the model sees of a cell's outputs: budgeted text, clean errors, images.

Derived from the nbformat outputs, never replacing them: the transcript keeps the
full bundles. Pure functions, unit-tested with hand-made outputs.
"""

from __future__ import annotations

import base64
import html
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from ..edges.images import IMAGE_MIMES
from ..results import CellResult, strip_ansi

__all__ = ["CellView", "render_cell", "budget_text", "html_to_text", "image_size"]

_TAG = re.compile(r"<[^>]+>")
_BLANKS = re.compile(r"\n\s*\n+")


@dataclass
class CellView:
    """The text the model reads, plus image data URLs when it can see images."""

    text: str
    images: list[str] = field(default_factory=list)  # data: URLs


def budget_text(text: str, budget: int) -> str:
    """Keep at most ``budget`` characters: head and tail, with the cut stated."""
    if len(text) <= budget:
        return text
    head = budget * 2 // 3
    tail = budget - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters cut ...]\n{text[-tail:]}"


def html_to_text(markup: str) -> str:
    """A rough plain-text rendering of HTML (tables become whitespace-separated rows)."""
    markup = re.sub(r"(?is)<(script|style).*?</\1>", "", markup)
    markup = re.sub(r"(?i)</(tr|p|div|h\d|li)>|<br\s*/?>", "\n", markup)
    markup = re.sub(r"(?i)</t[dh]>", "\t", markup)
    return _BLANKS.sub("\n", html.unescape(_TAG.sub("", markup))).strip()


def image_size(mime: str, data: str) -> str:
    """'640x480, 23 KB' for a base64 PNG; the size alone for other types."""
    try:
        raw = base64.b64decode(data) if mime != "image/svg+xml" else data.encode()
    except (ValueError, TypeError):
        return "unreadable"
    kb = f"{max(1, len(raw) // 1024)} KB"
    if mime == "image/png" and raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return f"{width}x{height}, {kb}"
    return kb


def _bundle_text(data: dict[str, Any]) -> str:
    plain = data.get("text/plain")
    if "text/html" in data and (not plain or plain.startswith("<")):
        return html_to_text(data["text/html"])
    if plain:
        return plain
    for mime in ("text/markdown", "text/latex", "application/json"):
        if mime in data:
            value = data[mime]
            return value if isinstance(value, str) else repr(value)
    if "text/html" in data:
        return html_to_text(data["text/html"])
    return ""


def _clean_traceback(traceback: list[str], limit: int = 40) -> str:
    lines = strip_ansi("\n".join(traceback)).splitlines()
    lines = [line for line in lines if not set(line) <= {"-", " "}]
    if len(lines) > limit:
        lines = lines[:5] + ["..."] + lines[-(limit - 6) :]
    return "\n".join(lines)


def render_cell(result: CellResult, *, budget: int = 4000, vision: bool = False) -> CellView:
    """The model's view of one executed cell."""
    pieces: list[str] = []
    images: list[str] = []
    for out in result.outputs:
        kind = out.get("output_type")
        if kind == "stream":
            pieces.append(out.get("text", ""))
        elif kind == "error":
            pieces.append(
                _clean_traceback(out.get("traceback", []))
                or f"{out.get('ename')}: {out.get('evalue')}"
            )
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            for mime in IMAGE_MIMES:
                if mime in data:
                    size = image_size(mime, data[mime])
                    if vision and mime != "image/svg+xml":
                        images.append(f"data:{mime};base64,{data[mime]}")
                        pieces.append(f"[{mime} image, {size}: attached]")
                    else:
                        pieces.append(
                            f"[{mime} image, {size}: displayed to the user, not shown to you]"
                        )
                    break
            else:
                text = _bundle_text(data)
                if text:
                    pieces.append(text if text.endswith("\n") else text + "\n")
    body = "".join(p if p.endswith("\n") else p + "\n" for p in pieces).rstrip("\n")
    body = budget_text(body, budget)
    if result.status == "timeout" and result.error is not None:
        body = f"{body}\n{result.error.evalue}".strip()
    elif result.status == "died" and result.error is not None:
        body = f"{body}\n{result.error.evalue}".strip()
    if not body:
        body = "(no output)"
    return CellView(text=body, images=images)
