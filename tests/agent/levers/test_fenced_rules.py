"""fenced_rules: one fenced block runs per reply."""

from __future__ import annotations

from kernel_agent.agent.levers.fenced_rules import FencedRules
from kernel_agent.agent.state import TaskState, Turn


def test_fenced_rules_keep_one_block_of_a_fenced_reply() -> None:
    lever, st = FencedRules(), TaskState("t")
    fenced = Turn(["a = 1", "b = 2"], "", fenced=True)
    lever.after_reply(st, fenced)
    assert fenced.codes == ["a = 1"]
    calls = Turn(["a = 1", "b = 2"], "", ["c1", "c2"])
    lever.after_reply(st, calls)
    assert calls.codes == ["a = 1", "b = 2"]
