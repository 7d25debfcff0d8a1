"""The text that crosses to and from an ACP client: fences that kernel output cannot
close, the task a prompt asks, and the notebook a prompt names.

Pure functions; :mod:`kernel_agent.frontends.acp_agent` uses them.
"""

from __future__ import annotations

import re
from typing import Any

from ..edges.escapes import visible

__all__ = ["fenced", "fenced_inline", "prompt_text", "notebook_named", "ATTACHED_CHARS"]

#: Most characters of a prompt's attached text resources, together.
ATTACHED_CHARS = 50_000

_BACKTICKS = re.compile(r"`+")


def fenced(text: str, lang: str = "") -> str:
    """``text`` in a Markdown code fence longer than any backtick run inside it, so a
    client that renders Markdown shows it as text (no links, images or HTML)."""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def fenced_inline(text: str) -> str:
    """``text`` as a Markdown code span (escaped, and backticks cannot end it early)."""
    text = visible(text)
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}"


def prompt_text(blocks: list[Any]) -> str:
    """The task a prompt asks: its text, attached text resources (bounded), file links."""
    parts: list[str] = []
    attached = 0
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"(attached file: {block.uri})")
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            text = block.resource.text[: max(0, ATTACHED_CHARS - attached)]
            attached += len(text)
            parts.append(f"Attached {block.resource.uri}:\n{fenced(text)}")
    return "\n\n".join(p for p in parts if p.strip())


def notebook_named(prompt: list[Any]) -> str | None:
    """The notebook a prompt names: its first resource link to a server path ending
    ``.ipynb`` (no scheme); a link that is not a plain server path is a ConfigError."""
    from ..jupyter.server import check_notebook_path

    for block in prompt:
        uri = getattr(block, "uri", None)
        if getattr(block, "type", "") != "resource_link" or not isinstance(uri, str):
            continue
        if uri.endswith(".ipynb") and "://" not in uri and len(uri) <= 1024:
            return check_notebook_path(uri)
    return None
