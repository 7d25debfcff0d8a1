"""The lever ablation's selection and arithmetic (pure: rows as ``eval_analysis`` writes them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

from ablate_levers import acted_on, effect  # noqa: E402
from eval_analysis import arguments, select  # noqa: E402


def row(task, solved, *fired, chain=None):
    r = {"task": task, "solved": solved, "answer": "", "kind": "solved" if solved else "wrong value",
         "levers_fired": [{"lever": n, "right_before": rb} for n, rb in fired]}  # fmt: skip
    if chain:
        r["chain"] = chain
    return r


BASE = [
    row("a", True, ("preflight", None), ("answer_check", True)),
    row("b", False, ("answer_check", False), ("answer_check", False)),
    row("c", True),
    row("f1", True, chain="chain-x"),
    row("f2", False, ("repeat_guard", None), chain="chain-x"),
]


def test_a_lever_is_run_again_where_it_acted_and_a_chain_whole():
    where = acted_on(BASE)
    assert where == {"preflight": ["a"], "answer_check": ["a", "b"], "repeat_guard": ["chain-x"]}


def test_its_net_effect_compares_the_same_questions_with_and_without_it():
    e = effect("answer_check", BASE, [row("a", True), row("b", True)])
    assert (e.units, e.questions, e.right_with, e.right_without, e.net) == (2, 2, 1, 2, -1)
    assert (e.sent_back_right, e.half_right, e.wrong_with, e.wrong_without) == (1, 3, 1, 0)
    assert (
        "net -1; wrong values stated with it 1, without 0; sent back right answers 1/3" in e.line()
    )
    chained = effect("repeat_guard", BASE, [row("f1", False), row("f2", False)])
    assert (chained.questions, chained.right_with, chained.right_without) == (2, 1, 0)


def test_a_rerun_selects_tasks_and_chains_by_id():
    from followup_tasks import CHAINS
    from messy_tasks import MESSY_TASKS

    task, chain = MESSY_TASKS[0].id, CHAINS[0].id
    tasks, chains = select(arguments(["--levers=-preflight", f"--only={task}", f"--only={chain}"]))
    assert [t.id for t in tasks] == [task] and [c.id for c in chains] == [chain]
