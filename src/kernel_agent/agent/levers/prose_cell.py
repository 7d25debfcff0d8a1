"""``prose_cell``: a fenced "cell" that is the final answer in prose is not run.

It is asked for as text instead. A prose cell is a turn without progress: it counts in
``TaskState.stalls``, which ``stall_guard`` acts on.
"""

from __future__ import annotations

import ast
import re

from ...prompts import prompt
from ..slots import ONLY_SLOTS
from ..state import Ask, TaskState
from .base import Lever

__all__ = ["ProseCell", "looks_like_prose"]

_SENTENCE = re.compile(r"^[\"'*_]*[A-Z][A-Za-z'’-]*(?: +[^\s=(){}]+){3,}")
_CODE_MARK = re.compile(r"[=(){}\[\]]|^\s*(?:import|from|def|class|for|if|print)\b")
#: the header of a cell's output as the model is shown it (prompts/cell_output.md), which a
#: small model sometimes sends back as a "cell" with the output it read (seen on the tuned half)
_OUTPUT_ECHO = re.compile(r"^#?\s*Output of cell \[\d*\] \([a-z_]+\):")
#: a value as a cell prints it, not as Python writes it ('46.0%', '$1,234.50'): sent back
#: as a "cell" after it was printed (a scratch churn question, 2026-12-07)
_BARE_VALUE = re.compile(r"[-+]?[$€£]?\s*\d[\d,]*(?:\.\d+)?\s*(?:%|[A-Za-z]{1,5})?")


def looks_like_prose(code: str) -> bool:
    """True for a "cell" that is English sentences, not code (a final answer in a fence).

    It must not parse as Python, and most of its lines must read as sentences with no
    assignment, call or bracket in them; or it is a cell's output as the model was shown
    it (``Output of cell [n] (ok):`` and what followed), or values as printed ('46.0%'),
    sent back as code.
    """
    try:
        ast.parse(code)
        return False
    except SyntaxError:
        pass
    lines = [line.strip() for line in code.strip().splitlines() if line.strip()]
    if any(_OUTPUT_ECHO.match(line) for line in lines):
        return True  # a cell's output sent back as code (after a comment or an import, too)
    if lines and all(ONLY_SLOTS.match(line) for line in lines):
        return True  # "@mean[2.50]" lines: an answer in @name[value] slots, not code
    if lines and all(_BARE_VALUE.fullmatch(line) for line in lines):
        return True  # "46.0%": a printed value sent back as a cell
    if not lines or any(line.startswith(("!", "%", "#")) for line in lines):
        return False
    sentences = sum(1 for ln in lines if _SENTENCE.match(ln) and not _CODE_MARK.search(ln))
    return sentences * 2 > len(lines)


class ProseCell(Lever):
    """A fenced "cell" that is the final answer in prose is not run: it is asked for as text."""

    name = "prose_cell"

    def before_cell(self, state: TaskState, code: str) -> Ask | None:
        if not state.ran_code or not looks_like_prose(code):
            return None
        state.stalls += 1
        return Ask(
            prompt("prose_in_code", text=code.strip()[:600]),
            notice="the model wrote prose in a code block; asked for it as the answer",
            cell_meta={"refused": "prose"},
            failure=False,
        )
