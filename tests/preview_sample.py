"""What the preview measures of the test files the preflight tests correct cells against
(the penguins export with its end-spaced names, a pipe-separated weather file, a latin-1
file with a decimal comma)."""

from __future__ import annotations

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
