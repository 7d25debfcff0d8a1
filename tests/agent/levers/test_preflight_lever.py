"""preflight, the lever (the corrections are tests/agent/preflight/test_preflight.py's)."""

from __future__ import annotations

from preview_sample import FACTS

from kernel_agent.agent.levers.preflight import Preflight
from kernel_agent.agent.state import TaskState


def test_the_lever_needs_a_python_kernel_and_names_itself():
    state = TaskState(task="t", data_facts=dict(FACTS))
    assert Preflight().rewrite(state, "df['species']") is None  # libraries not probed
    state.libraries = {"pandas": "2"}
    assert Preflight().rewrite(state, "df['species']") == ("df['Species ']", "")
    assert Preflight().rewrite(state, "df['Island']") is None
