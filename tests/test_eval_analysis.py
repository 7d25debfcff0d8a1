"""The analysis eval's own correctness: its data is deterministic, every task has finite
answers, halves are balanced, and the strict scorer accepts right answers only."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

from analysis_tasks import TASKS, Expected, frame, write_dataset  # noqa: E402
from eval_analysis import lever_log, number_matches, report, score  # noqa: E402
from real_tasks import REAL_DATASETS, REAL_TASKS, real_frame, write_real_dataset  # noqa: E402


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


def test_real_tasks_are_thirty_or_more_in_balanced_halves():
    assert len(REAL_TASKS) >= 30
    ids = [t.id for t in [*TASKS, *REAL_TASKS]]
    assert len(set(ids)) == len(ids)
    halves = [t.half for t in REAL_TASKS]
    assert abs(halves.count("tuned") - halves.count("held-out")) <= 1
    for category in {t.category for t in REAL_TASKS}:
        part = [t.half for t in REAL_TASKS if t.category == category]
        assert abs(part.count("tuned") - part.count("held-out")) <= 1, category
    assert {t.suite for t in REAL_TASKS} == {"real"} and {t.suite for t in TASKS} == {"synthetic"}
    assert {t.slots for t in REAL_TASKS} == {True, False}  # both answer forms


def test_real_data_ships_offline_and_every_answer_is_finite(tmp_path):
    """The datasets come from files inside installed packages (no network in tests)."""
    written = {}
    for task in REAL_TASKS:
        if task.dataset not in written:
            path, written[task.dataset] = write_real_dataset(task.dataset, tmp_path)
            assert path.name == REAL_DATASETS[task.dataset][0] and path.stat().st_size > 0
        expected = task.answers(written[task.dataset])
        assert len(expected) >= 2, task.id
        for e in expected:
            assert isinstance(e.value, str) or math.isfinite(e.value), (task.id, e)
        prompt = task.prompt(expected)
        assert REAL_DATASETS[task.dataset][0] in prompt
        assert all(f"@{e.name}[" in prompt for e in expected) == task.slots


def test_the_issues_macrodata_example_is_a_task_with_its_answer(tmp_path):
    task = next(t for t in REAL_TASKS if t.id == "real-macro-unemp-year")
    _, df = write_real_dataset("macrodata", tmp_path)
    assert len(df) == 203 and df["year"].dtype.kind == "i"
    year, mean = task.answers(df)
    assert (year.value, round(mean.value, 2)) == (1982.0, 9.70)
    # the worst single quarter (10.7) is not the worst year's mean
    assert score(task, [year, mean], "ok", "@year[1982] @mean_unemp[9.70]", "", False).solved
    assert not score(task, [year, mean], "ok", "@year[1982] @mean_unemp[10.70]", "", False).solved
    assert real_frame("iris")["species"].nunique() == 3


def test_lever_log_scores_the_reply_each_lever_refused(tmp_path):
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    task = next(t for t in REAL_TASKS if t.id == "real-macro-unemp-year")
    exp = [Expected("year", 1982.0, 0), Expected("mean_unemp", 9.7, 2)]
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("note", metadata={"kernel_agent": {
            "role": "note", "lever": "states_result", "reply": "@year[1982] @mean_unemp[9.70]"}}),
        new_markdown_cell("note", metadata={"kernel_agent": {
            "role": "note", "lever": "answer_format", "reply": "The year 1982, 9.7"}}),
        # a fresh start where the run would give up refuses no answer: it acted on cells
        new_markdown_cell("note", metadata={"kernel_agent": {
            "role": "note", "lever": "repeat_guard"}}),
        new_markdown_cell("answer", metadata={"kernel_agent": {"role": "answer"}}),
    ]  # fmt: skip
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    assert lever_log(str(path), task, exp) == [
        {"lever": "states_result", "right_before": True},
        {"lever": "answer_format", "right_before": False},
        {"lever": "repeat_guard", "right_before": None},
    ]
    rows = [dict(half="tuned", suite="real", category="group-by", solved=True, kind="solved",
                 in_outputs=True, seconds=5, levers_fired=lever_log(str(path), task, exp)[:2])]  # fmt: skip
    text = report(rows)
    assert "real tuned 1/1 solved" in text
    assert "states_result 1 (1 on answers, 1 of them right)" in text
    assert "answer_format 1 (1 on answers, 0 of them right)" in text
    rows[0]["levers_fired"].append({"lever": "repeat_guard", "right_before": None})
    assert "repeat_guard 1 (1 on cells)" in report(rows)


def test_lever_log_names_each_lever_that_acted_on_one_cell(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    task = next(t for t in REAL_TASKS if t.id == "real-macro-unemp-year")
    exp = [Expected("year", 1982.0, 0), Expected("mean_unemp", 9.7, 2)]
    nb = new_notebook()
    nb.cells = [
        new_code_cell("x = 1", metadata={"kernel_agent": {"lever": "preflight+auto_import+answer_check"}}),
        new_code_cell("y = 2", metadata={"kernel_agent": {}}),
    ]  # fmt: skip
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    assert [f["lever"] for f in lever_log(str(path), task, exp)] == [
        "preflight", "auto_import", "answer_check"]  # fmt: skip
