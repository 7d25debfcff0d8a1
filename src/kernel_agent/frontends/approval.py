"""Asking a person before each cell runs: the question and how answers are read.

Front ends (the CLI, the magic) only say how to ask and how to read a line; the
agent calls ``approve(code, step)`` and gets ("run", code) | ("skip", None) | ("quit", None).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["QUESTION", "ask_until_decided", "read_code_until_dot"]

QUESTION = "cell {step}: [r]un, [s]kip, [e]dit, [q]uit? "

_ACTIONS = {
    "": "run",
    "r": "run",
    "run": "run",
    "s": "skip",
    "skip": "skip",
    "q": "quit",
    "quit": "quit",
    "e": "edit",
    "edit": "edit",
}


def read_code_until_dot(read_line: Callable[[], str], say: Callable[[str], object]) -> str:
    """Read replacement code line by line, until a line holding a single '.'."""
    say("enter the new code; finish with a line holding a single '.'")
    lines = []
    while (line := read_line()) != ".":
        lines.append(line)
    return "\n".join(lines)


def ask_until_decided(
    code: str, step: int, ask: Callable[[str], str], edit: Callable[[str], str]
) -> tuple[str, str | None]:
    """Ask until the answer is one of run / skip / edit / quit (EOF means quit)."""
    while True:
        try:
            action = _ACTIONS.get(ask(QUESTION.format(step=step)).strip().lower())
        except EOFError:
            return "quit", None
        if action == "run":
            return "run", code
        if action in ("skip", "quit"):
            return action, None
        if action == "edit":
            return "run", edit(code) or code
