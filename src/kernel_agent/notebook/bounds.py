"""How many characters a kernel's message costs the host, and the run's share of them.

Pure. :func:`json_size` measures any JSON value (a whole message content, an output
node, a namespace report) as the serialised size it takes in a notebook, without
building the serialisation: each string counts as its JSON escape (exact, ASCII-escaped,
so never fewer characters than its UTF-8 bytes) plus what nbformat adds per line when
it writes a multi-line string as a list of lines; numbers, keys, brackets and commas
are counted too. The walk is iterative (any depth) and stops as soon as the total
passes ``limit``, so measuring a 100 MB message costs no more than measuring
``limit`` characters of it.

:class:`RunBudget` is what one run (one executor) may keep in all: every cell's
:class:`~kernel_agent.notebook.outputs.OutputCollector` gets at most what is left of
it, and charges what it kept when the cell ends.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "MAX_METADATA_CHARS",
    "bounded_metadata",
    "cut_lines",
    "cut_text",
    "truncation_marker",
    "json_size",
    "RunBudget",
    "LINE_OVERHEAD",
    "BASE_DEPTH",
    "MAX_COUNT",
    "RUN_FACTOR",
    "sane_count",
]

#: how deep an output sits in a written notebook (cells, a cell, outputs, an output),
#: as indent: nbformat writes one space per level, kernel-agent's transcript two more
BASE_DEPTH = 8
#: what a line costs besides its indent: quotes, a comma, a newline
LINE_OVERHEAD = 4

#: an output's metadata over this is dropped (an image's width and height are kept)
MAX_METADATA_CHARS = 4096
_LINE = LINE_OVERHEAD + BASE_DEPTH + 2  # what a traceback line costs besides its text
#: an execution count above this is forged (nbformat and every front end use int32)
MAX_COUNT = 2**31 - 1
#: a run keeps at most this many times the per-output bound (32 M characters by default)
RUN_FACTOR = 32


def sane_count(value: Any, default: int | None = None) -> int | None:
    """``value`` if it is an execution count a kernel could give (0 <= n < 2**31)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return default


def _string_size(text: str, limit: int, depth: int) -> int:
    if len(text) > limit:
        return len(text) + 2  # already over: not worth escaping
    # nbformat writes a string as a list of lines, one line each
    return len(json.dumps(text)) + 4 + (LINE_OVERHEAD + depth) * (text.count("\n") + 1)


def _scalar_size(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 5
    if isinstance(value, int):
        # no str(): a 10**100000 is refused by str() and costly to print
        return value.bit_length() * 31 // 100 + 2
    if isinstance(value, float):
        return len(repr(value))
    return len(json.dumps(str(value)))  # not JSON: counted as the string it would become


def json_size(value: Any, limit: int = 2**62) -> int:
    """The characters ``value`` takes in a notebook as nbformat writes it (indented, a
    string per line), or any number over ``limit`` once it is known to be over (the
    walk stops there). An upper bound for a value written at most :data:`BASE_DEPTH`
    levels deep: each entry of a list or an object counts its own line and indent."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, BASE_DEPTH)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            total += _string_size(item, limit - total, depth)
        elif isinstance(item, dict):
            total += 2 + (LINE_OVERHEAD + depth + 2) * len(item)  # ": " and a line each
            if total > limit:
                return total
            for key, inner in item.items():
                total += _string_size(key, limit - total, depth) if isinstance(key, str) else 8
                stack.append((inner, depth + 1))
                if total > limit:
                    return total
        elif isinstance(item, (list, tuple)):
            total += 2 + (LINE_OVERHEAD + depth) * len(item)
            if total > limit:
                return total
            stack.extend((inner, depth + 1) for inner in item)
        else:
            total += _scalar_size(item)
        if total > limit:
            return total
    return total


class RunBudget:
    """The characters one run may keep of its kernel's messages, across all its cells."""

    @classmethod
    def for_outputs(cls, max_output_chars: int) -> RunBudget:
        """The run budget that goes with a per-output bound."""
        return cls(RUN_FACTOR * max_output_chars)

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.spent = 0
        #: characters refused (counted, never kept) since the budget ran out
        self.omitted = 0

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent)

    def charge(self, chars: int, omitted: int = 0) -> None:
        self.spent += max(0, chars)
        self.omitted += max(0, omitted)


def truncation_marker(omitted: int) -> str:
    return f"\n[kernel-agent: output truncated, {omitted:,} characters omitted]\n"


def cut_text(text: str, limit: int) -> str:
    """``text``'s head and tail around a marker, when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = max(0, limit // 2)
    return text[:half] + truncation_marker(len(text) - 2 * half) + text[len(text) - half :]


def cut_lines(lines: list[str], limit: int) -> list[str]:
    """A traceback's first and last lines within ``limit`` characters (each line cut
    first), with one line saying how many were left out between them."""
    head: list[str] = []
    tail: list[str] = []
    room = limit // 2
    for line in lines:
        piece = cut_text(line, limit // 4)
        if len(piece) + _LINE > room:
            break
        head.append(piece)
        room -= len(piece) + _LINE
    room = limit // 2
    for index in range(len(lines) - 1, len(head) - 1, -1):
        piece = cut_text(lines[index], limit // 4)
        if len(piece) + _LINE > room:
            break
        tail.append(piece)
        room -= len(piece) + _LINE
    left_out = len(lines) - len(head) - len(tail)
    if left_out:
        head.append(f"[kernel-agent: {left_out:,} traceback lines omitted]")
    return head + tail[::-1]


def bounded_metadata(metadata: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``metadata`` if it is small, else only its images' width and height, and the
    bound it was over (0 when kept whole)."""
    if json_size(metadata, MAX_METADATA_CHARS) <= MAX_METADATA_CHARS:
        return metadata, 0
    kept: dict[str, Any] = {}
    for mime, value in list(metadata.items())[:16]:
        if isinstance(mime, str) and mime.startswith("image/") and len(mime) < 80:
            if isinstance(value, dict):
                sizes = {k: sane_count(value.get(k)) for k in ("width", "height")}
                if any(v is not None for v in sizes.values()):
                    kept[mime] = {k: v for k, v in sizes.items() if v is not None}
    return kept, MAX_METADATA_CHARS
