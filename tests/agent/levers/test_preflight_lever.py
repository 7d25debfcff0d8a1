"""preflight, the lever (the corrections are tests/agent/preflight/test_preflight.py's)."""

from __future__ import annotations

from kernel_agent.agent.levers.preflight import Preflight
from kernel_agent.agent.state import TaskState
from kernel_agent.kernel_state.preview_facts import FileFacts

PENGUINS = FileFacts(
    columns=(
        "Species ",
        "Island",
        "Date Egg",
        "Flipper Length (mm)",
        "Body Mass (g) ",
        "Delta 15 N (o/oo)",
        "Delta 13 C (o/oo)",
        "avg. wait time",
    ),
    dates={"Date Egg": "%m/%d/%y"},
    delimited=True,
)


FACTS = {
    "penguins.csv": PENGUINS,
    "weather.txt": FileFacts(
        sep="|", delimited=True, columns=("date", "wind"), dates={"date": "%d/%m/%Y"}
    ),
    "votes.csv": FileFacts(
        sep=";", encoding="latin-1", decimal_comma=True, delimited=True, columns=("Joly",)
    ),
}


def test_the_lever_needs_a_python_kernel_and_names_itself():
    state = TaskState(task="t", data_facts=dict(FACTS))
    assert Preflight().rewrite(state, "df['species']") is None  # libraries not probed
    state.libraries = {"pandas": "2"}
    assert Preflight().rewrite(state, "df['species']") == ("df['Species ']", "")
    assert Preflight().rewrite(state, "df['Island']") is None
