"""Text from a kernel or a model, made safe to show in a terminal: :func:`visible`.

A terminal acts on control characters: an escape sequence in a cell's output could
retitle the window, rewrite what was shown, or write the clipboard (OSC 52). Bidi
controls and zero-width characters do not act, but they make a line read differently
from what it is ("Trojan Source": code that looks like a comment, a name with a hidden
character). Every one of them is shown as its escape (``\\x1b``, ``\\u202e``), never
passed through. Pure, and idempotent: an escape has no control character left in it.
"""

from __future__ import annotations

import re

__all__ = ["visible", "INVISIBLE"]

#: C0 controls but newline and tab, DEL, C1 controls (what a terminal acts on); the bidi
#: embeddings, overrides and isolates; zero-width spaces, joiners and marks, the word
#: joiner and the byte-order mark (what makes a line read as something it is not).
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]"
)


def visible(text: str) -> str:
    """``text`` with every character of :data:`INVISIBLE` shown as an escape, never raw."""
    return INVISIBLE.sub(lambda m: _escape(m.group()), text)


def _escape(char: str) -> str:
    shown = repr(char)[1:-1]  # \r, \x1b, \u202e: Python's own spelling
    return shown if shown != char else f"\\u{ord(char):04x}"
