"""The lever base: the ask budget as data, and fresh memory for each task (pure units)."""

from __future__ import annotations

from kernel_agent.agent.levers.base import AskBudget, Lever
from kernel_agent.agent.state import Ask, Stop, TaskState

ASK = Ask("again")
STOP = Stop("no_answer", "stopped")


def test_a_budget_of_one_then_accept_asks_once_then_takes_the_answer() -> None:
    budget = AskBudget(asks=1, then="accept")
    assert budget.consults(0)
    used, decision = budget.settle(0, ASK, lambda: STOP)
    assert (used, decision) == (1, ASK)
    assert not budget.consults(1), "spent: the lever is not asked again"
    assert budget.settle(1, ASK, lambda: STOP) == (1, None), "past the budget: accepted"


def test_a_budget_of_one_then_stop_asks_once_then_ends_the_run() -> None:
    budget = AskBudget(asks=1, then="stop")
    assert budget.settle(0, ASK, lambda: STOP) == (1, ASK)
    assert budget.consults(1), "a stopping lever is still asked: it stops only if it objects"
    assert budget.settle(1, ASK, lambda: STOP) == (1, STOP)
    assert budget.settle(1, None, lambda: STOP) == (1, None), "no objection: no stop"


def test_no_objection_and_a_levers_own_stop_spend_nothing() -> None:
    for then in ("accept", "stop"):
        budget = AskBudget(asks=2, then=then)  # type: ignore[arg-type]
        assert budget.settle(0, None, lambda: STOP) == (0, None)
        own = Stop("no_answer", "the lever's own")
        assert budget.settle(0, own, lambda: STOP) == (0, own)
        assert budget.settle(1, ASK, lambda: STOP) == (2, ASK), "two asks allowed"


class _Objects(Lever):
    name = "objects"
    budget = AskBudget(asks=2, then="stop")

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        return ASK if "wrong" in answer else None

    def stop(self, state: TaskState, answer: str) -> Stop:
        return STOP


def test_on_answer_applies_the_budget_and_a_task_gets_fresh_memory() -> None:
    lever, st = _Objects(), TaskState("t")
    assert lever.on_answer(st, "fine") is None
    assert [lever.on_answer(st, "wrong") for _ in range(3)] == [ASK, ASK, STOP]
    fresh = lever.for_task()
    assert fresh is not lever and fresh.asked == 0 and lever.asked == 2
    assert fresh.on_answer(TaskState("t"), "wrong") == ASK


def test_a_lever_without_a_budget_never_refuses_an_answer() -> None:
    assert Lever().on_answer(TaskState("t"), "anything") is None
