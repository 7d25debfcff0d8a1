"""Deno's Jupyter kernel (TypeScript/JavaScript): sandboxed behind the ipc relay, driven
by the agent with fenced ```typescript blocks. ``make deno-kernel`` installs it.

The scripted server covers the loop; one test runs the bundled local model end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, fenced, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.events import RunFinished
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(300)

SANDBOX = "none" if bwrap_problem()[0] else "bwrap"


def _deno_spec() -> str | None:
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().find_kernel_specs().get("deno")


if _deno_spec() is None:
    message = "no 'deno' kernelspec: run `make deno-kernel` (npm's @deno/linux-x64-glibc)"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(
        fake,
        tmp_path,
        **(dict(protocol="fenced", kernel_name="deno", sandbox=SANDBOX, levers="none") | kw),
    )


def test_the_agent_drives_deno_with_typescript_fences(fake_llm, tmp_path):
    tmp_path.chmod(0o755)  # pytest makes it 0700: the sandbox's uid could not enter it
    (tmp_path / "input.txt").write_text("from the user")
    fake_llm.enqueue(
        fenced(
            "let f = 1n;\nfor (let i = 1n; i <= 15n; i++) f *= i;\nconsole.log(f.toString());",
            lang="typescript",
        ),
        fenced(
            "const results: string[] = [];\n"
            "for (const [what, f] of [\n"
            "  ['net', () => fetch('http://1.1.1.1/')],\n"
            "  ['write outside', () => Deno.writeTextFile('/etc/owned', 'x')],\n"
            "  ['write here', () => Deno.writeTextFile('out.txt', 'ok')],\n"
            "] as const) {\n"
            "  try { await f(); results.push(`${what}: allowed`); }\n"
            "  catch (e) { results.push(`${what}: refused`); }\n"
            "}\n"
            "console.log(results.join('\\n'));\n"
            "console.log(Deno.env.get('DENO_DIR') ?? Deno.env.get('HOME'));\n"
            "console.log(Deno.readTextFileSync('input.txt'));",
            lang="ts",
        ),
        text("15! = 1307674368000"),
    )
    with Agent(settings_for(fake_llm, tmp_path)) as agent:
        events = list(agent.run("Calculate 15!"))
    assert isinstance(events[-1], RunFinished)
    result = events[-1].result
    assert result.status == "ok", result.answer
    assert result.cells[0].outputs[0]["text"] == "1307674368000\n"
    lines = result.cells[1].outputs[0]["text"].splitlines()
    assert lines[:3] == ["net: refused", "write outside: refused", "write here: allowed"]
    if SANDBOX == "bwrap":
        assert lines[3].startswith("/tmp")  # Deno's cache lives in the sandbox's own /tmp
    assert len(lines) > 4 and lines[4] == "from the user", result.cells[1].outputs
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert "typescript" in system and "```typescript" in system
    assert "call_tool" not in system  # the host helpers are Python-only
    nb = nbformat.read(result.notebook, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "deno"
    assert nb.metadata["language_info"]["name"] == "typescript"
    assert result.isolation == SANDBOX


def test_deno_kernel_from_the_cli_on_the_local_model(tmp_path, model_home):
    """``kernel-agent run --kernel deno "Calculate 15!"`` on the bundled model."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None or not any(model_home.glob("**/*.gguf")):
        message = "the bundled local model is not assembled here (see tests/test_local_e2e.py)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    nb = tmp_path / "deno.ipynb"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernel_agent",
            "run",
            "--model",
            "local",
            "--temperature",
            "0",
            "--kernel",
            "deno",
            "--sandbox",
            SANDBOX,
            "--cwd",
            str(tmp_path),
            "--max-steps",
            "6",
            "--notebook",
            str(nb),
            "--format",
            "plain",
            "Calculate 15!",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={**env, "KERNEL_AGENT_HOME": str(model_home)},
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    book = nbformat.read(nb, as_version=4)
    outputs = "".join(
        o.get("text", "") or o.get("data", {}).get("text/plain", "")
        for c in book.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert "1307674368000" in outputs, outputs
    assert book.metadata["kernelspec"]["name"] == "deno"
