"""Levers against spinning: a run that makes no progress is asked once for its answer, then ends.

Small models loop in a few recognisable ways, all seen in real runs: the same successful
cell again and again, a cell whose output is one already seen, ``!pip install`` in a
kernel that cannot install, the final sentence written inside a code fence (a
SyntaxError, then the last good cell again). Each is a turn of *no progress*; after
:data:`STALL_LIMIT` of them in a row the model is asked once for its final answer,
stated from what was printed. If it still does not give one, the run ends with status
``no_answer`` and says what the last output was: ``max_steps`` stays a backstop.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from ..llm.view import render_cell
from ..prompts import prompt
from ..results import CellResult
from .lever import Lever, normalize_code
from .slots import ONLY_SLOTS
from .state import Ask, Stop, TaskState

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["STALL_LIMIT", "NoInstall", "ProseCell", "StallGuard", "looks_like_prose"]

#: turns in a row without progress before the model is asked for its final answer
STALL_LIMIT = 2

_INSTALL = re.compile(
    r"^\s*(?:[!%]\s*(?:pip3?|conda|mamba|uv|apt(?:-get)?)\s+(?:pip\s+)?install\b"
    r"|.*\b(?:subprocess|os\.system)\b.*\bpip3?\b.*\binstall\b"
    r"|.*\bpip\.main\(\s*\[\s*['\"]install)",
    re.M,
)
_SENTENCE = re.compile(r"^[\"'*_]*[A-Z][A-Za-z'’-]*(?: +[^\s=(){}]+){3,}")
_CODE_MARK = re.compile(r"[=(){}\[\]]|^\s*(?:import|from|def|class|for|if|print)\b")
#: the header of a cell's output as the model is shown it (prompts/cell_output.md), which a
#: small model sometimes sends back as a "cell" with the output it read (seen on the tuned half)
_OUTPUT_ECHO = re.compile(r"^#?\s*Output of cell \[\d*\] \([a-z_]+\):")


def looks_like_prose(code: str) -> bool:
    """True for a "cell" that is English sentences, not code (a final answer in a fence).

    It must not parse as Python, and most of its lines must read as sentences with no
    assignment, call or bracket in them; or it is a cell's output as the model was shown
    it (``Output of cell [n] (ok):`` and what followed), sent back as code.
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
    if not lines or any(line.startswith(("!", "%", "#")) for line in lines):
        return False
    sentences = sum(1 for ln in lines if _SENTENCE.match(ln) and not _CODE_MARK.search(ln))
    return sentences * 2 > len(lines)


class StallGuard(Lever):
    """Repeated cells and repeated outputs count as no progress; two ask for the answer once.

    A successful cell sent again is not re-run (its output is known). After the ask, one
    more turn without progress ends the run with status ``no_answer``.
    """

    name = "stall_guard"

    def before_cell(self, state: TaskState, code: str) -> Ask | Stop | None:
        seen = state.succeeded.get(normalize_code(code))
        if seen is not None:
            state.stalls += 1
            decision = self._decide(state)
            if decision is not None:
                return decision
            return Ask(
                prompt("repeated_cell", output=_tail(seen)),
                notice="the model repeated a cell that already ran; not run again",
                cell_meta={"repeat": True},
                failure=False,
            )
        return self._decide(state)

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> None:
        if not cell.ok:
            return  # failures have their own bound (max_consecutive_errors)
        text = render_cell(cell, budget=4000).text.strip()
        repeated = bool(text) and text in state.succeeded.values()
        state.succeeded[normalize_code(cell.code)] = text
        state.stalls = state.stalls + 1 if repeated else 0

    def on_answer(self, state: TaskState, answer: str) -> Ask | None:
        return None

    def _decide(self, state: TaskState) -> Ask | Stop | None:
        if state.stalls < STALL_LIMIT:
            return None
        if self._once(state):
            return Ask(
                prompt("final_answer_now", printed=_last_outputs(state)),
                notice="no progress for two turns; asking the model for its final answer",
                failure=False,
            )
        if state.stalls <= STALL_LIMIT:
            return None
        last = _last_outputs(state)
        return Stop(
            "no_answer",
            "No final answer: the model kept repeating itself after it was asked for one."
            + (f" The last output was:\n\n```\n{last}\n```" if last else ""),
            notice="the model made no progress after being asked for its answer; stopping",
        )


class NoInstall(Lever):
    """``!pip install`` in a kernel that cannot install is refused and names what is there.

    Under an install policy other than ``never`` the model is pointed at
    ``install_package(name)``, which installs on the host under that policy.
    """

    name = "no_install"

    def __init__(self, policy: str = "never") -> None:
        self.policy = policy

    @classmethod
    def from_settings(cls, settings: Settings) -> NoInstall:
        return cls(settings.install)

    def before_cell(self, state: TaskState, code: str) -> Ask | None:
        if not _INSTALL.search(code):
            return None
        state.stalls += 1
        have = ", ".join(sorted(state.libraries)) or "the standard library"
        name = "no_install" if self.policy == "never" else "use_install_package"
        return Ask(
            prompt(name, libraries=have, policy=self.policy),
            notice="the model tried to install a package; refused (no network in the kernel)",
            cell_meta={"refused": "install"},
            failure=False,
        )


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


def _tail(text: str, limit: int = 1200) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _last_outputs(state: TaskState, cells: int = 3, limit: int = 1500) -> str:
    outputs = [render_cell(c, budget=2000).text.strip() for c in state.cells if c.ok]
    shown = "\n".join(o for o in outputs[-cells:] if o)
    return _tail(shown, limit)
