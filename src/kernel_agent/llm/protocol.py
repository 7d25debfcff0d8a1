"""How the model hands us code, and small builders for the messages we send it. Pure.

Two protocols:

- ``"tools"``: the model calls the :data:`RUN_CELL_TOOL` function, ``run_cell(code)``;
- ``"fenced"``: the model writes a fenced ``python`` block, found by
  :func:`split_code` (for models and servers without tool calls).

:func:`choose_protocol` picks one; :func:`parse_model_spec` reads ``provider:model``.
"""

from __future__ import annotations

import base64
import re
import textwrap
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import ConfigError
from ..settings import Settings
from .providers import PROVIDERS as _PROVIDER_TABLE

__all__ = [
    "PROVIDERS",
    "RUN_CELL_TOOL",
    "ProtocolName",
    "choose_protocol",
    "image_part",
    "parse_model_spec",
    "split_code",
    "tool_result_message",
    "user_message",
]

ProtocolName = Literal["tools", "fenced"]

PROVIDERS = tuple(_PROVIDER_TABLE)
"""Prefixes :func:`parse_model_spec` knows. Others stay part of the name (``llama3:8b``)."""

RUN_CELL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run_cell",
        "description": (
            "Run Python code in a persistent Jupyter kernel, as a new notebook cell. "
            "Variables, imports and files persist between calls. Returns the cell's "
            "output: printed text, the value of the last expression, errors, and figures."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
            "additionalProperties": False,
        },
    },
}


def parse_model_spec(spec: str) -> tuple[str | None, str]:
    """Split a model spec: ``"openai:gpt-4o-mini"`` -> ``("openai", "gpt-4o-mini")``.

    A plain name passes through: ``"gpt-4o"`` -> ``(None, "gpt-4o")``. ``"local"`` ->
    ``("local", "")`` and ``"local:PATH"`` -> ``("local", "PATH")``. Only the prefixes in
    :data:`PROVIDERS` are split off, so ``"qwen2.5-coder:1.5b"`` stays whole.
    """
    spec = (spec or "").strip()
    if not spec:
        raise ConfigError("no model given: pass --model or set KERNEL_AGENT_MODEL")
    if spec.lower() == "local":
        return "local", ""
    prefix, sep, rest = spec.partition(":")
    if sep and prefix.lower() in PROVIDERS:
        provider = prefix.lower()
        if not rest.strip() and provider != "local":
            raise ConfigError(f"model spec {spec!r} names a provider but no model")
        return provider, rest.strip()
    return None, spec


def choose_protocol(settings: Settings, model: str | None = None) -> ProtocolName:
    """An explicit ``settings.protocol`` wins; ``auto`` means fenced for local models, else tools.

    ``model`` is the spec the user gave (default ``settings.model``). When a server then
    rejects ``tools``, :func:`kernel_agent.llm.should_fall_back_to_fenced` says so.
    """
    if settings.protocol == "tools":
        return "tools"
    if settings.protocol == "fenced":
        return "fenced"
    spec = model if model is not None else settings.model
    provider = parse_model_spec(spec)[0] if spec else None
    return "fenced" if provider == "local" else "tools"


# -- fenced code -----------------------------------------------------------------------

_PY_TAGS = frozenset({"", "python", "py", "python3", "py3", "ipython", "ipython3", "jupyter"})
#: Deno's kernel runs TypeScript and JavaScript alike
_JS_TAGS = frozenset({"", "typescript", "ts", "tsx", "javascript", "js", "jsx"})
_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_OPEN_LATE = re.compile(
    r"(?P<fence>`{3,})[ \t]*(?P<info>[A-Za-z][\w+.-]*)[ \t]*$"
)  # "Sure: ```python"
_TAG = re.compile(r"[\w+#.-]+")


def split_code(
    text: str, language: str | None = "python", *, include_unclosed: bool = True
) -> tuple[list[str], str]:
    """(the code blocks in ``text`` written in ``language``, the prose around every block).

    For ``"python"``: blocks tagged ``python``, ``py``, ``python3``, ``ipython`` and bare
    ````` ``` ````` blocks; ``language=None`` takes every block. Tolerates ``~~~`` fences,
    longer fences, indented fences (list items), ``{python}`` tags, an opening fence at the
    end of a sentence, a closing fence glued to the last code line, and (unless
    ``include_unclosed=False``) an unclosed block at the end of truncated output.

    The prose is ``text`` with each fenced block taken out, whatever its language or
    fence (so a ``~~~python`` block run as a cell does not also stay in the prose).
    """
    if language is None:
        wanted = None
    elif language.lower() in _PY_TAGS:
        wanted = _PY_TAGS
    elif language.lower() in _JS_TAGS:
        wanted = _JS_TAGS
    else:
        wanted = frozenset({"", language.lower()})
    blocks: list[str] = []
    prose: list[str] = []
    state: tuple[int, str, str, list[str]] | None = None  # indent, fence, tag, lines

    def close() -> None:
        assert state is not None
        _indent, _fence, tag, lines = state
        code = textwrap.dedent("\n".join(lines)).strip("\n")
        if code.strip() and (wanted is None or tag in wanted):
            blocks.append(code)

    for line in text.splitlines():
        if state is None:
            state = _opening(line, late=True)
            if state is None:
                prose.append(line)
            elif not _OPEN.match(line):  # "Sure: ```python": the words before the fence stay
                prose.append(line[: line.rindex(state[1])].rstrip())
            if state is not None:
                prose.append("")  # a paragraph break where the block was
            continue
        indent, fence, _tag, lines = state
        stripped = line.strip()
        reopened = _opening(line, late=False)
        if reopened is not None and reopened[2]:  # "```python" again: the last one never closed
            close()
            state = reopened
        elif stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            close()
            state = None
        elif fence[0] == "`" and line.rstrip().endswith(fence):
            lines.append(_unindent(line.rstrip()[: -len(fence)], indent))
            close()
            state = None
        else:
            lines.append(_unindent(line, indent))
    if state is not None and include_unclosed:
        close()
    return blocks, re.sub(r"\n{3,}", "\n\n", "\n".join(prose)).strip()


def _opening(line: str, *, late: bool) -> tuple[int, str, str, list[str]] | None:
    m = _OPEN.match(line) or (_OPEN_LATE.search(line) if late else None)
    if m is None:
        return None
    tags = _TAG.findall(m.group("info"))
    return (
        len(m.groupdict().get("indent") or ""),
        m.group("fence"),
        tags[0].lower() if tags else "",
        [],
    )


def _unindent(line: str, indent: int) -> str:
    """Drop up to ``indent`` leading blanks (the fence's own indentation)."""
    n = 0
    while n < indent and n < len(line) and line[n] in " \t":
        n += 1
    return line[n:]


# -- messages --------------------------------------------------------------------------


def image_part(
    data: bytes | str, mime: str = "image/png", *, detail: str | None = None
) -> dict[str, Any]:
    """An ``image_url`` content part. ``bytes`` are encoded; a ``str`` is taken as base64
    (as nbformat stores ``image/png``) unless it is already a ``data:`` or ``http(s):`` URL."""
    if isinstance(data, bytes):
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    elif data.startswith(("data:", "http://", "https://")):
        url = data
    else:
        url = f"data:{mime};base64,{''.join(data.split())}"
    image: dict[str, Any] = {"url": url}
    if detail:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def user_message(text: str, images: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A user message: plain text, or a content list with the :func:`image_part` parts after it."""
    if not images:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, *images]}


def tool_result_message(call_id: str, content: str) -> dict[str, Any]:
    """The reply to one tool call (text only: image parts go in a following user message)."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}
