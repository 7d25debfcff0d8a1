"""The OutputCollector's one budget, fed plain lists of hostile messages (pure).

Every field of every message type is filled with megabytes in turn (tests/fuzz_messages.py,
the same cases the real-kernel fuzz sends); the property: what the cell keeps, written
as a notebook, stays within the cell's bound, and a run's cells within the run's.
"""

from __future__ import annotations

from typing import Any

import nbformat
import pytest
from fuzz_messages import CASES, Case, messages
from nbformat.v4 import new_code_cell, new_notebook

from kernel_agent.notebook.bounds import RunBudget, json_size
from kernel_agent.notebook.outputs import MAX_DISPLAY_NODES, OutputCollector

MAX = 100_000  # the per-output bound in these units (1 M by default)
BIG = 1_500_000
# a cell: its budget and its notes
CELL_BOUND = 8 * MAX + 16_384


def msg(msg_type: str, **content: Any) -> dict[str, Any]:
    return {
        "header": {"msg_type": msg_type},
        "parent_header": {},
        "metadata": {},
        "content": content,
    }


def written(*cells: list[Any]) -> int:
    """The bytes of a notebook holding these cells' outputs, as nbformat writes it."""
    nb = new_notebook(cells=[new_code_cell(outputs=outputs) for outputs in cells])
    text = nbformat.writes(nb)
    nbformat.validate(nbformat.reads(text, as_version=4))
    return len(text.encode())


def run_cell(feed: list[dict[str, Any]], **kw: Any) -> OutputCollector:
    collector = OutputCollector(MAX, **kw)
    for m in feed:
        collector.feed(m)
    collector.finish()
    return collector


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_field_flooded_keeps_a_cell_within_its_bound(case: Case) -> None:
    collector = run_cell(messages(case, BIG))
    assert collector.kept_chars <= CELL_BOUND
    assert written(collector.outputs) <= CELL_BOUND
    for output in collector.outputs:
        assert json_size(output) <= 3 * MAX + 65_536
    assert collector.execution_count is None or collector.execution_count < 2**31


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_field_flooded_over_many_cells_keeps_the_run_within_its_bound(case: Case) -> None:
    budget, shared = RunBudget.for_outputs(MAX), {}
    cells = [run_cell(messages(case, BIG), run_budget=budget, display_map=shared) for _ in range(6)]
    # the run's budget, and the floor of the cells after it
    assert written(*(c.outputs for c in cells)) <= budget.limit + 6 * (MAX // 50 + 16_384)


def test_m1_error_traceback_and_evalue_are_cut() -> None:
    tb = ["E" * 1_000_000] * 40
    collector = run_cell([msg("error", ename="Boom", evalue="v" * 10_000_000, traceback=tb)] * 3)
    assert written(collector.outputs) <= CELL_BOUND
    assert collector.error is not None and collector.error.ename == "Boom"
    assert len(collector.error.evalue) < MAX
    assert sum(map(len, collector.error.traceback)) < MAX
    assert "traceback lines omitted" in collector.error.traceback[-2]


def test_m2_metadata_is_dropped_keeping_image_sizes_and_forged_counts_are_dropped() -> None:
    big = {"m": "M" * 40_000_000, "image/png": {"width": 640, "height": 480, "x": "y"}}
    collector = run_cell(
        [msg("display_data", data={"text/plain": "small"}, metadata=big, transient={})] * 3
        + [msg("execute_result", data={"text/plain": "r"}, metadata={}, execution_count=10**30)]
    )
    first = collector.outputs[0]
    assert first.metadata == {"image/png": {"width": 640, "height": 480}}
    assert "omitted output metadata" in first.data["text/plain"]
    assert collector.outputs[3].execution_count is None and collector.execution_count is None
    assert written(collector.outputs) < 10_000


def test_m4_an_update_is_charged_once_per_output_it_lands_in() -> None:
    shows = [
        msg(
            "display_data",
            data={"text/plain": f"d{i}"},
            metadata={},
            transient={"display_id": "same"},
        )
        for i in range(MAX_DISPLAY_NODES)
    ]
    update = msg(
        "update_display_data",
        data={"text/plain": "u" * 99_000},
        metadata={"m": "z" * 1_000_000},
        transient={"display_id": "same"},
    )
    collector = run_cell([*shows, update])
    # 32 copies of a 99 k update are 3.2 M: more than the cell's share for updates
    assert all(o.data["text/plain"].startswith("d") for o in collector.outputs[:32])
    assert "characters of output omitted" in collector.outputs[-1].text
    assert written(collector.outputs) < 100_000
    small = msg("update_display_data", data={"text/plain": "u" * 5_000}, metadata={},
                transient={"display_id": "same"})  # fmt: skip
    collector = run_cell([*shows, small])
    assert all(o.data["text/plain"] == "u" * 5_000 for o in collector.outputs[:32])
    assert collector.kept_chars >= 32 * 5_000


def test_m5_many_updates_across_cells_stay_within_the_run() -> None:
    budget, shared = RunBudget.for_outputs(MAX), {}
    ids = [
        msg(
            "display_data", data={"text/plain": "d"}, metadata={}, transient={"display_id": f"i{i}"}
        )
        for i in range(40)
    ]
    cells = [run_cell(ids, run_budget=budget, display_map=shared)]
    for _ in range(5):
        updates = [
            msg(
                "update_display_data",
                data={"text/plain": "u" * 90_000},
                metadata={"m": "z" * 90_000},
                transient={"display_id": f"i{i % 40}"},
            )
            for i in range(300)
        ]
        cells.append(run_cell(updates, run_budget=budget, display_map=shared))
    assert written(*(c.outputs for c in cells)) <= budget.limit + CELL_BOUND


def test_streams_still_coalesce_and_clear_output_still_clears() -> None:
    feed = [
        msg("stream", name="stdout", text="a"),
        msg("stream", name="stdout", text="b\n"),
        msg("clear_output", wait=True),
        msg("stream", name="stdout", text="after"),
    ]
    assert [o.text for o in run_cell(feed).outputs] == ["after"]
    assert [o.text for o in run_cell(feed[:2]).outputs] == ["ab\n"]


def test_a_spent_run_keeps_only_a_small_floor_and_says_why() -> None:
    budget = RunBudget.for_outputs(MAX)
    budget.charge(budget.limit)
    collector = run_cell([msg("stream", name="stdout", text="x" * 500_000)], run_budget=budget)
    assert written(collector.outputs) < MAX // 50 + 4096
    assert "the run's output budget is spent" in collector.outputs[-1].text
    tiny = run_cell([msg("stream", name="stdout", text="42\n")], run_budget=budget)
    assert tiny.outputs[0].text == "42\n"  # a small answer is still seen


def test_what_is_shown_live_is_charged_to_the_run_too() -> None:
    # serve's event log keeps every live piece: a cell whose kept head and tail are small
    # but whose live output was large pays for the live part
    budget, shown = RunBudget.for_outputs(MAX), []
    feed = [msg("stream", name="stdout", text="s" * 50_000)] * 40
    collector = OutputCollector(MAX, on_output=shown.append, run_budget=budget)
    for m in feed:
        collector.feed(m)
    collector.finish()
    live = sum(len(node.get("text", "")) for node in shown)
    assert budget.spent + 1_000 >= live > 2 * collector.kept_chars  # (the live note)
