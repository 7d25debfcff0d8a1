"""An answer that repeats our own instructions is not an answer: :func:`echo_share`
(the ``prompt_echo`` lever, :mod:`.levers.prompt_echo`, acts on it).

A small model sometimes replies with the push it was just sent ("The last cell failed,
so the task is not done yet. Do not give up ...") and the run would end with that as
its answer. Each lever's ask, note and hint the model was sent in the task is recorded
(``TaskState.told``); the words of ours in them are the fixed text of the prompt files
(``prompts/*.md``) that appear there, not the values filled in (outputs, errors) nor
the task the user wrote. An answer is an echo when at least half of its own text is
copied from those words, in verbatim runs of at least :data:`WINDOW` characters after
whitespace and case are normalised. Text copied from the task or a cell (the code, its
output) is neither ours nor the answer's own: it is left out of the count. A short
phrase in common ("the final answer") is never a run, so it passes.

The notes sent with the task (the data preview) are ours whole, values and all: the
bundled model, done with a question, went on to write the user's next turn, a question
of its own and the preview copied under it, and that was the run's answer (the issue's
hidden sets, and a pandas-exercises question on a file with a continent 'NA', 2026-12-07).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from string import Template

from ..prompts import templates

__all__ = ["SHORTEST", "WINDOW", "echo_share", "normalise"]

#: the verbatim run, in normalised characters, that counts as copied
WINDOW = 40
#: an answer shorter than this is not judged (a shorter one is judged whole)
SHORTEST = 24
#: how much of an answer, and of each text compared with it, is read
_READ = 6000


def normalise(text: str) -> str:
    """Lower case, one space for each run of blanks, no backticks or asterisks."""
    return " ".join(text.replace("`", " ").replace("*", " ").casefold().split())


@cache
def _fixed_parts() -> tuple[str, ...]:
    """The words of every prompt file between its ``$placeholders``, normalised."""
    parts: set[str] = set()
    for text in templates().values():
        pieces = Template.pattern.sub("\0", text).split("\0")
        parts.update(p for p in map(normalise, pieces) if len(p) >= SHORTEST)
    return tuple(sorted(parts))


def _windows(texts: Iterable[str], width: int) -> set[str]:
    out: set[str] = set()
    for text in texts:
        text = text[:_READ]
        out.update(text[i : i + width] for i in range(len(text) - width + 1))
    return out


def echo_share(
    answer: str, told: Sequence[str], given: Sequence[str], briefing: Sequence[str] = ()
) -> float:
    """The share of ``answer``'s own text copied from our prompts' words in ``told``, or
    from any part of ``briefing``.

    ``told``: the messages the model was sent in the task (asks, notes, hints), as sent;
    ``given``: texts that are not ours (the task, each cell's code and output). 0.0 when
    no run of :data:`WINDOW` characters (a short answer: all of it) is copied.
    """
    text = normalise(answer)[:_READ]
    if len(text) < SHORTEST:
        return 0.0
    width = min(WINDOW, len(text))
    sent = [normalise(t) for t in told]
    joined = "\n".join(sent)
    ours = [part for part in _fixed_parts() if len(part) >= width and part in joined]
    ours += [part for part in map(normalise, briefing) if len(part) >= width]
    if not ours:
        return 0.0
    theirs = _windows((normalise(t) for t in given), width)
    copied_windows = _windows(ours, width) - theirs
    neutral_windows = theirs | _windows(sent, width)
    copied = [False] * len(text)
    neutral = [False] * len(text)
    for i in range(len(text) - width + 1):
        window = text[i : i + width]
        if window in copied_windows:
            copied[i : i + width] = [True] * width
        elif window in neutral_windows:
            neutral[i : i + width] = [True] * width
    n_copied = sum(copied)
    own = len(text) - sum(1 for c, n in zip(copied, neutral, strict=True) if n and not c)
    return n_copied / own if n_copied else 0.0
