"""Host tools: plain Python functions the kernel's code may call with ``call_tool``.

``Agent(tools=[fn, ...])`` or ``--tools package.module:name`` (a function, or a list
of functions). Each tool's name, signature and docstring go into the system prompt.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["Tool", "load_tools", "make_tools", "describe_tools"]

#: a docstring in the prompt is cut at this many characters
_DOC_CHARS = 600


@dataclass(frozen=True)
class Tool:
    name: str
    fn: Callable[..., Any]

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def signature(self) -> str:
        try:
            return f"{self.name}{inspect.signature(self.fn, eval_str=True)}"
        except (NameError, TypeError, ValueError, SyntaxError):
            pass
        try:  # annotations that do not evaluate stay as written
            return f"{self.name}{inspect.signature(self.fn)}"
        except (TypeError, ValueError):
            return f"{self.name}(**kwargs)"

    def doc(self) -> str:
        text = inspect.getdoc(self.fn) or ""
        return text if len(text) <= _DOC_CHARS else text[: _DOC_CHARS - 3] + "..."


def make_tools(fns: Iterable[Callable[..., Any] | Tool]) -> dict[str, Tool]:
    """Tools by name; two tools with one name are a :class:`ConfigError`."""
    tools: dict[str, Tool] = {}
    for fn in fns:
        tool = fn if isinstance(fn, Tool) else Tool(_name_of(fn), fn)
        if tool.name in tools and tools[tool.name].fn is not tool.fn:
            raise ConfigError(f"two host tools are named {tool.name!r}")
        tools[tool.name] = tool
    return tools


def _name_of(fn: Callable[..., Any]) -> str:
    if not callable(fn):
        raise ConfigError(f"a host tool must be a function, got {type(fn).__name__}")
    name = getattr(fn, "__name__", "")
    if not name.isidentifier() or name == "<lambda>":
        raise ConfigError(f"a host tool needs a plain name, got {name!r}")
    return name


def load_tools(specs: Sequence[str]) -> list[Callable[..., Any]]:
    """The functions named by ``package.module:name`` specs (a function or a list of them)."""
    out: list[Callable[..., Any]] = []
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"--tools wants package.module:name, got {spec!r}")
        try:
            module = _import(module_name)
        except ImportError as exc:
            raise ConfigError(f"--tools {spec}: cannot import {module_name}: {exc}") from None
        try:
            value = getattr(module, attr)
        except AttributeError:
            raise ConfigError(f"--tools {spec}: {module_name} has no {attr!r}") from None
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if not callable(item):
                raise ConfigError(f"--tools {spec}: {item!r} is not a function")
            out.append(item)
    return out


def _import(name: str) -> Any:
    """Import ``name``; a module in the current directory is found too (as ``python -m`` would)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        here = os.getcwd()
        if here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(name)


def describe_tools(tools: dict[str, Tool]) -> str:
    """The tools as the system prompt lists them: signature, then the indented docstring."""
    lines = []
    for tool in tools.values():
        lines.append(f"- `{tool.signature()}`")
        for doc_line in tool.doc().splitlines():
            lines.append(f"    {doc_line}".rstrip())
    return "\n".join(lines)
