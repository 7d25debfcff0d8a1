"""The analysis eval's own correctness: its data is deterministic, every task has finite
answers, halves are balanced, and the strict scorer accepts right answers only."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

from analysis_tasks import TASKS, Expected, frame, write_dataset  # noqa: E402
from eval_analysis import number_matches, report, score  # noqa: E402


def test_forty_tasks_in_balanced_halves_over_every_category():
    assert len(TASKS) >= 40 and len({t.id for t in TASKS}) == len(TASKS)
    halves = [t.half for t in TASKS]
    assert abs(halves.count("tuned") - halves.count("held-out")) <= 1
    categories = {t.category for t in TASKS}
    assert {"summary", "group-by", "correlation", "hypothesis test", "regression", "outliers",
            "feature engineering", "time series", "plot"} <= categories  # fmt: skip


def test_data_is_deterministic_and_every_answer_is_finite(tmp_path):
    assert frame("sales").equals(frame("sales"))
    written = {}
    for task in TASKS:
        if task.dataset not in written:
            written[task.dataset] = write_dataset(task.dataset, tmp_path)[1]
        expected = task.answers(written[task.dataset])
        assert len(expected) >= 1, task.id
        for e in expected:
            assert isinstance(e.value, str) or math.isfinite(e.value), (task.id, e)
        assert all(f"@{e.name}[" in task.prompt(expected) for e in expected) == task.slots


@pytest.mark.parametrize(
    ("written", "value", "decimals", "ok"),
    [
        ("12.35", 12.3456, 2, True),
        ("12.3456", 12.3456, 2, False),  # not rounded as asked
        ("12.34", 12.3456, 2, False),
        ("1,269", 1269.0, 0, True),
        ("45.07%", 45.0704, 2, True),
        ("0.1", 0.1, 4, True),
        ("-0.709", -0.7091, 3, True),
        ("abc", 1.0, 2, False),
        ("538641.89", 538641.885, 2, True),  # a tie rounds either way
        ("538641.88", 538641.885, 2, True),
        ("538641.87", 538641.885, 2, False),
    ],
)
def test_numbers_must_be_rounded_as_asked(written, value, decimals, ok):
    assert number_matches(written, Expected("x", value, decimals)) is ok


def test_slot_and_prose_scoring_and_failure_kinds():
    slots = next(t for t in TASKS if t.id == "sales-units-stats")
    exp = [Expected("mean_units", 9.93, 2), Expected("median_units", 10.0, 2)]
    assert score(slots, exp, "ok", "@mean_units[9.93] @median_units[10.0]", "", False).solved
    fmt = score(slots, exp, "ok", "The mean is 9.93 and the median 10.", "", False)
    assert not fmt.solved and fmt.kind == "format"
    wrong = score(slots, exp, "ok", "@mean_units[9.9] @median_units[10]", "9.93", False)
    assert wrong.kind == "wrong value" and not wrong.in_outputs
    gone = score(slots, exp, "max_steps", "Stopped", "9.93 10.0", False)
    assert gone.kind == "no answer" and gone.in_outputs
    assert score(slots, exp, "crash", "boom", "", False).kind == "crash"
    prose = next(t for t in TASKS if t.id == "sales-top-region")
    pexp = [Expected("region", "North"), Expected("total_units", 1269.0, 0)]
    assert score(prose, pexp, "ok", "North sold the most: 1,269 units.", "", False).solved
    assert not score(prose, pexp, "ok", "Northern sold 1269.", "", False).solved
    plot = next(t for t in TASKS if t.plot and not t.slots)
    pl = [Expected("product", "Widget"), Expected("share", 42.08, 2)]
    assert not score(plot, pl, "ok", "Widget, 42.08%", "", False).solved
    assert score(plot, pl, "ok", "Widget, 42.08%", "", True).solved


def test_report_gives_both_halves_and_the_failure_kinds():
    rows = [
        dict(
            half="tuned",
            category="summary",
            solved=True,
            kind="solved",
            in_outputs=True,
            seconds=10,
        ),
        dict(
            half="held-out",
            category="plot",
            solved=False,
            kind="format",
            in_outputs=True,
            seconds=30,
        ),
    ]
    text = report(rows)
    assert "tuned     1/1 solved" in text and "held-out  0/1 solved" in text
    assert "failures: format 1" in text and "printed every value: 1" in text
    assert "median 20.0" in text
