"""The README's Python API, as a user would write it (scripted model server, real kernel)."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from fake_openai import run_cell, text

import kernel_agent

pytestmark = pytest.mark.timeout(120)


def test_public_names_import_lazily():
    for name in kernel_agent.__all__:
        assert getattr(kernel_agent, name) is not None
    with pytest.raises(AttributeError):
        kernel_agent.no_such_name  # noqa: B018
    # `import kernel_agent` stays cheap: no nbformat/jupyter_client/openai until used
    probe = "import sys, kernel_agent; print(sorted(m for m in ('nbformat', 'jupyter_client', 'openai') if m in sys.modules))"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
        == "[]"
    )


def test_agent_readme_example(fake_llm, tmp_path):
    import random

    from kernel_agent import Agent, Settings

    random.seed(1)
    rolls = [random.randint(1, 6) for _ in range(1000)]
    fake_llm.enqueue(
        run_cell(
            "import random\nrandom.seed(1)\nrolls = [random.randint(1, 6) for _ in range(1000)]\nprint(len(rolls))"
        ),
        text("1000 rolls"),
        run_cell("print(sum(rolls) / len(rolls))"),
        text(f"The mean is {sum(rolls) / len(rolls)}."),
    )
    settings = Settings.from_env(
        env={},
        base_url=fake_llm.base_url,
        model="test",
        api_key="k",
        cwd=tmp_path,
        notebook_dir=tmp_path,
    )
    with Agent(settings) as agent:
        result = agent.run_to_end("Simulate 1000 dice rolls")
        kinds = [type(e).__name__ for e in agent.run("Now the mean of the rolls?")]
    assert result.status == "ok" and result.answer == "1000 rolls" and result.usage.total_tokens > 0
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished" and "CellFinished" in kinds
    nbformat.validate(nbformat.read(result.notebook, as_version=4))


def test_kernel_readme_example(tmp_path):
    from kernel_agent import KernelSession, Transcript

    with KernelSession(kernel_name="python3", cwd=tmp_path) as k:
        r = k.execute("import math; math.factorial(15)", timeout=30)
        assert (r.status, r.execution_count) == ("ok", 1)
        assert r.outputs[0]["data"]["text/plain"] == "1307674368000"
        t = Transcript(
            tmp_path / "run.ipynb", kernelspec=k.kernelspec, language_info=k.language_info
        )
        t.add_code(r.code, r)
    nbformat.validate(nbformat.read(tmp_path / "run.ipynb", as_version=4))
