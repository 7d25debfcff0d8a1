"""The plumbing of preflight's corrections: an edit of the code, where a node is, which
file a read call reads, and the string constants that name something."""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..code_text import called_name

if TYPE_CHECKING:
    from ...kernel_state.preview_facts import FileFacts

_READERS = {"read_csv": ",", "read_table": "\t"}
#: the separator of a table whose fields are runs of blanks (as the preview writes it)
WHITESPACE = r"\s+"
#: where a node is in the code: (start, end) byte offsets
Span = Callable[[ast.expr | ast.stmt | ast.keyword], tuple[int, int]]


@dataclass(frozen=True, order=True)
class _Edit:
    start: int  # byte offsets in the utf-8 code
    end: int
    text: str


def _strings(node: ast.expr) -> list[ast.Constant]:
    """A string constant, or the string constants of a list or tuple of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.List | ast.Tuple):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _added_arguments(call: ast.Call, span: Span, text: str) -> _Edit:
    """``text`` (``name=value, ...``) added after the call's last argument."""
    end = span([*call.args, *(k.value for k in call.keywords)][-1])[1]
    return _Edit(end, end, ", " + text)


#: the name of the function or method a call calls (one definition, in code_text)
_called = called_name


def _read_file(call: ast.Call, facts: Mapping[str, FileFacts]) -> FileFacts | None:
    name = _called(call)
    if name not in _READERS or not call.args:
        return None
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    path = posixpath.normpath(first.value)
    found = facts.get(path)
    return found if found is not None and found.delimited else None
