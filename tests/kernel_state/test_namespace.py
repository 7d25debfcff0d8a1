"""The namespace summary is the kernel's (it can forge it): what the model reads of it is
bounded per name and in total, whatever the report holds (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel_agent.kernel_state.namespace import (
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_SHORT_CHARS,
    MAX_SUMMARY_CHARS,
    describe,
    parse_summary,
)


def answer(report: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "data": {"text/plain": repr(json.dumps(report))}, "metadata": {}}


FORGED = {
    "long_names": {f"v{i}" + "n" * 700: {"type": "DataFrame", "columns": ["c" * 80] * 20} for i in range(24)},
    "long_fields": {
        f"v{i}": {"type": "T" * 200, "shape": "s" * 200, "value": "x" * 200, "columns": ["c" * 100] * 20}
        for i in range(60)
    },
    "many_names": {f"name_{i}": {"type": "int", "value": str(i)} for i in range(3000)},
}  # fmt: skip


@pytest.mark.parametrize("variant", sorted(FORGED))
def test_a_forged_report_is_bounded_per_name_in_total_and_in_the_note(variant: str) -> None:
    summary = parse_summary(answer(FORGED[variant]))
    assert summary is not None
    assert all(len(name) <= MAX_NAME_CHARS for name in summary)
    lines = [v.short() for v in summary.values()]
    assert all(len(line) <= MAX_SHORT_CHARS for line in lines)
    assert sum(len(line) + 2 for line in lines) <= MAX_SUMMARY_CHARS
    note = describe({}, summary, limit=10_000)
    assert len(note) <= MAX_NOTE_CHARS + 100


def test_an_honest_report_is_kept_whole() -> None:
    report = {"df": {"type": "DataFrame", "shape": "(3, 2)", "columns": ["a", "b"]}, "n": {"type": "int", "value": "3"}}  # fmt: skip
    summary = parse_summary(answer(report))
    assert summary is not None
    assert describe({}, summary) == "new: df (DataFrame, shape (3, 2), columns a, b), n (int = 3)"


@pytest.mark.parametrize("counts", [[True, 1], [-1], list(range(21)), ["3"], [1.5], "12"])
def test_forged_counts_are_left_out_and_honest_ones_kept(counts: Any) -> None:
    report = {"df": {"type": "DataFrame", "shape": "(3, 2)", "columns": ["a", "b"], "counts": counts}}  # fmt: skip
    summary = parse_summary(answer(report))
    assert summary is not None
    assert summary["df"].counts is None
    honest = parse_summary(answer({"s": {"type": "Series", "counts": [3]}}))
    assert honest is not None and honest["s"].counts == (3,)
