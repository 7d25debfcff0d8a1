"""auto_import: the cell runs with the import added, and the model reads only its output."""

from __future__ import annotations

import nbformat
from fake_openai import run_cell, scripted_settings, text

from kernel_agent.agent import Agent


def test_the_cell_runs_with_the_import_and_the_model_reads_only_its_output(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("r = stats.norm.cdf(0)\nprint('r =', r)"),
        text("r is 0.5."),
    )
    settings = scripted_settings(fake_llm, tmp_path, clean_notebook=False)
    with Agent(settings) as agent:
        result = list(agent.run("What is the standard normal CDF at 0?"))[-1].result
    assert result.status == "ok"
    seen = fake_llm.requests[1].last_user_text
    assert "r = 0.5" in seen and "was added" not in seen and "NameError" not in seen
    nb = nbformat.read(result.notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source.startswith("from scipy import stats\n")
    assert code[0].metadata["kernel_agent"]["lever"] == "auto_import"
    assert "NameError" not in str(code[0].outputs)
