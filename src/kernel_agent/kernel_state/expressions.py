"""Reading a ``user_expression``'s answer: the kernel's text, parsed as the host's data.

A kernel answers a ``user_expression`` with a MIME bundle whose ``text/plain`` is the
value's ``repr``. The kernel can forge that answer (replace ``user_expressions`` in
its shell, or send its own reply), so it is read here as hostile input: the bundle's
shape is checked, its length bounded *before* ``ast.literal_eval`` (a 300,000
character literal exhausts the parser's memory), and any failure gives None.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_EXPRESSION_CHARS", "expression_json", "expression_string", "kernel_call"]

#: the longest ``text/plain`` answer parsed (the namespace summary is ~40 KB at most)
MAX_EXPRESSION_CHARS = 200_000


def _plain(bundle: Any, limit: int) -> str | None:
    if not isinstance(bundle, Mapping) or bundle.get("status", "ok") != "ok":
        return None
    data = bundle.get("data")
    if not isinstance(data, Mapping):
        return None
    text = data.get("text/plain")
    if not isinstance(text, str) or len(text) > limit:
        return None
    return text


def expression_string(bundle: Any, limit: int = MAX_EXPRESSION_CHARS) -> str | None:
    """The string a ``user_expression`` evaluated to (its repr parsed back), or None."""
    text = _plain(bundle, limit)
    if text is None:
        return None
    try:
        value = ast.literal_eval(text)
    except Exception:  # SyntaxError, ValueError, MemoryError, RecursionError: all the kernel's
        return None
    return value if isinstance(value, str) else None


def expression_json(bundle: Any, limit: int = MAX_EXPRESSION_CHARS) -> Any:
    """The JSON value of a ``user_expression`` that evaluated to a JSON string, or None."""
    text = expression_string(bundle, limit)
    if text is None:
        return None
    try:
        return json.loads(text)
    except Exception:  # ValueError, RecursionError
        return None


def kernel_call(source: str, arguments: str) -> str:
    """A ``user_expression`` that defines ``source``'s ``result`` function in a namespace of
    its own (nothing of the user's is touched) and gives ``json.dumps(result(arguments))``:
    read its answer with :func:`expression_json`."""
    return (
        "__import__('json').dumps((lambda _ka_g: (exec(" + repr(source) + ", _ka_g), "
        f"_ka_g['result']({arguments}))[1])({{}}))"
    )
