"""unread_column on a real kernel with the scripted server: a subset the task names and no
cell selects is noted under the cell, and the composed answer waits for the model."""

from __future__ import annotations

import nbformat
from fake_openai import run_cell, scripted_settings, text

from kernel_agent.agent import Agent

CHICKS = "weight,Time,Chick,Diet\n" + "".join(
    f"{40 + 10 * i + 50 * d},{i},{d * 10 + i},{d}\n" for d in (1, 2) for i in range(6)
)
TASK = (
    "Using the file chick.csv: among chicks on Diet 1, what is the mean weight?\n"
    "Give the final answer in this format: @mean_weight[value]"
)
ALL_ROWS = (
    "import pandas as pd\ndf = pd.read_csv('chick.csv')\n"
    "print(f\"@mean_weight[{df['weight'].mean():.2f}]\")"
)
DIET_1 = "print(f\"@mean_weight[{df[df['Diet'] == 1]['weight'].mean():.2f}]\")"


def _run(fake_llm, tmp_path, *replies, **settings):
    (tmp_path / "chick.csv").write_text(CHICKS)
    fake_llm.enqueue(*replies)
    made = scripted_settings(fake_llm, tmp_path, clean_notebook=False, **settings)
    with Agent(made) as agent:
        return agent.run_to_end(TASK)


def test_a_named_subset_no_cell_selects_is_noted_and_the_answer_waits(fake_llm, tmp_path):
    result = _run(fake_llm, tmp_path, run_cell(ALL_ROWS), run_cell(DIET_1))
    under_cell = fake_llm.requests[1].last_user_text
    assert "@mean_weight[140.00]" in under_cell  # both diets' rows
    assert "the task names the column 'Diet', and no cell that ran has used it" in under_cell
    assert result.status == "ok" and result.answer == "@mean_weight[115.00]"
    fake_llm.assert_drained()
    nb = nbformat.read(result.notebook, as_version=4)
    levers = [c.metadata["kernel_agent"].get("lever") for c in nb.cells if c.cell_type == "code"]
    assert levers == ["unread_column", None]


def test_without_the_lever_the_all_rows_mean_is_the_answer(fake_llm, tmp_path):
    """What the lever prevents, on the same script (so the test above can fail)."""
    result = _run(fake_llm, tmp_path, run_cell(ALL_ROWS), text("unused"), levers="-unread_column")
    assert result.answer == "@mean_weight[140.00]"


def test_a_prose_answer_with_the_column_unread_goes_back_once(fake_llm, tmp_path):
    result = _run(
        fake_llm,
        tmp_path,
        run_cell("import pandas as pd\ndf = pd.read_csv('chick.csv')"),
        text("@mean_weight[90.00]"),
        text("@mean_weight[90.00]"),
        # the preview (its columns) and this lever alone: no cell printed 90.00 to ground it
        levers=("data_preview", "unread_column"),
    )
    asked = fake_llm.requests[2].last_user_text
    assert "the column 'weight' and the column 'Diet', and no cell" in asked
    assert result.answer == "@mean_weight[90.00]"  # asked once, then accepted
    fake_llm.assert_drained()
