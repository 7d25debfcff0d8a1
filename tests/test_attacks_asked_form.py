"""The final answer is put in the asked form host-side: a composed answer is the kernel's
printed text, and the model's answer may quote anything a cell printed. Hostile input,
rewritten by regular expressions and stored in the transcript.

The property: whatever the answer holds, the rewrite never raises, makes no value more than
two characters longer (``1992/4/30`` is ``1992-04-30``), adds at most one slot the task asks
and the answer left out per slot name, of at most 100 characters of printed value, leaves
an answer over the bound untouched, and finishes at once on the shapes
that make a backtracking pattern slow (long runs of digits, dots, month names, unclosed
reprs). The payloads are random and were written for no one rewrite.
"""

from __future__ import annotations

import random

import pytest

from kernel_agent.agent.asked_form import MAX_CHARS, in_asked_form

TASKS = [
    "On which date (YYYY-MM-DD), in which month (1-12) and which year (as a four-digit "
    "year)? Round to 2 decimal places.",
    "Which year? @year[integer] @start[date]",
    "What is the mean, rounded to 3 decimal places?",
]
PIECES = [
    "April", "Apr.", "Sept", "May", " 30", "th", ", ", "1992", "/", "-", ".", "0", "9" * 50,
    "np.float64(", "np.int64(", "np.str_('", "Timestamp('", "')", ")", "00:00:00", " ",
    "@year[", "@start[", "]", "\n", "é", "\x00", "1." + "1" * 40, "((((", "T",
    ",", "29,92", "1,2345678",
]  # fmt: skip


def _payload(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        out.append(rng.choice(PIECES))
        length += len(out[-1])
    return "".join(out)[:size]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(40))
def test_a_hostile_answer_is_rewritten_safely(seed):
    rng = random.Random(seed)
    answer = _payload(rng, rng.choice([50, 500, 5_000, MAX_CHARS]))
    printed = _payload(rng, rng.choice([50, 5_000, 10 * MAX_CHARS]))  # a cell's output too
    for task in TASKS:
        out, done = in_asked_form(task, answer, printed if rng.random() < 0.5 else answer)
        added = [r for r in done if not r.written]  # a left-out slot, filled from the printed
        assert len(added) <= 2 and all(len(r.asked) <= len("@start[]") + 100 for r in added)
        assert all(len(r.asked) <= len(r.written) + 2 for r in done if r.written)  # 1992/4/30
        assert len(out) <= len(answer) + 2 * len(done) + sum(len(r.asked) + 1 for r in added)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "answer",
    [
        "1" * MAX_CHARS,
        "1." * (MAX_CHARS // 2),
        "April " * (MAX_CHARS // 6),
        "np.float64(" * (MAX_CHARS // 11),
        "@year[" * (MAX_CHARS // 6),
        "30 of " * (MAX_CHARS // 6),
        "1992-01-01 00:00:00." * (MAX_CHARS // 21),
        "1," * (MAX_CHARS // 2),
        "12,3" * (MAX_CHARS // 4),
    ],
)
def test_the_slow_shapes_for_a_pattern_finish(answer):
    for task in TASKS:
        out, done = in_asked_form(task, answer, printed=answer)  # a cell printed it too
        assert len(out) <= len(answer) + 2 * len(done)


def test_an_answer_over_the_bound_is_not_read():
    answer = "April 30, 1992 " * MAX_CHARS
    assert in_asked_form(TASKS[0], answer) == (answer, [])
