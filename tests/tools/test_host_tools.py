"""Host tools from kernel code: ``call_tool`` / ``call_tools_parallel`` over Jupyter comms.

A real sandboxed kernel (bwrap, where the host allows it), the scripted server through
the real openai client; the tools are plain functions here in the test process.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.errors import ConfigError
from kernel_agent.events import RunFinished
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.settings import Settings
from kernel_agent.tools.registry import describe_tools, load_tools, make_tools

pytestmark = pytest.mark.timeout(120)

_PROBLEM = bwrap_problem()[0]
SANDBOX = "none" if _PROBLEM else "bwrap"

CALLS: list[tuple[str, float, float]] = []
_LOCK = threading.Lock()


def lookup(city: str) -> dict:
    """The population of a city (a fixed table)."""
    return {"city": city, "population": {"Oslo": 709_000, "Lima": 10_000_000}.get(city, 0)}


def pause(seconds: float = 0.3, tag: str = "") -> str:
    """Sleep for ``seconds`` and record when it ran."""
    start = time.monotonic()
    time.sleep(seconds)
    with _LOCK:
        CALLS.append((tag, start, time.monotonic()))
    return tag


def explode(why: str) -> None:
    """Always raises."""
    raise ValueError(f"exploded: {why}")


def not_json() -> object:
    return {1, 2}


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(
        fake, tmp_path, **(dict(sandbox=SANDBOX, tool_timeout=5.0, levers="none") | kw)
    )


def run(fake: FakeLLM, tmp_path: Path, tools=(), **kw):
    with Agent(settings_for(fake, tmp_path, **kw), tools=tools) as agent:
        events = list(agent.run("use the tools"))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result


def code_meta(path: Path) -> list[dict]:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return [c.metadata["kernel_agent"] for c in nb.cells if c.cell_type == "code"]


def test_tools_in_a_loop_reach_the_prompt_and_the_transcript(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell(
            "pops = [call_tool('lookup', city=c)['population'] for c in ('Oslo', 'Lima', 'X')]\n"
            "print(pops)"
        ),
        text("done"),
    )
    result = run(fake_llm, tmp_path, tools=[lookup])
    assert result.status == "ok", result.answer
    assert result.cells[0].outputs[0]["text"] == "[709000, 10000000, 0]\n"
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert "lookup(city: str) -> dict" in system and "The population of a city" in system
    meta = code_meta(result.notebook)[0]
    assert [c["tool"] for c in meta["tool_calls"]] == ["lookup"] * 3
    assert meta["tool_calls"][0]["args"] == '{"city": "Oslo"}' and meta["tool_calls"][0]["ok"]
    assert result.isolation == SANDBOX


def test_parallel_calls_overlap_and_return_in_order(fake_llm, tmp_path):
    CALLS.clear()
    fake_llm.enqueue(
        run_cell(
            "import time\nt = time.monotonic()\n"
            "r = call_tools_parallel([('pause', {'seconds': 0.4, 'tag': str(i)}) "
            "for i in range(6)])\n"
            "print(r, round(time.monotonic() - t, 2))"
        ),
        text("done"),
    )
    result = run(fake_llm, tmp_path, tools=[pause])
    out = result.cells[0].outputs[0]["text"]
    assert out.startswith("['0', '1', '2', '3', '4', '5']"), out
    assert float(out.split()[-1]) < 6 * 0.4 / 2  # serial would take 2.4 s
    starts = [s for _, s, _ in CALLS]
    ends = [e for _, _, e in CALLS]
    assert max(starts) < min(ends)  # every call had started before any finished


def test_raising_unknown_timed_out_and_unserialisable_tools(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell(
            "for name, kw in [('explode', {'why': 'no fuel'}), ('nope', {}), "
            "('pause', {'seconds': 3}), ('not_json', {})]:\n"
            "    try:\n"
            "        call_tool(name, **kw)\n"
            "    except ToolError as e:\n"
            "        print(type(e).__name__, '|', e)"
        ),
        run_cell("call_tool('explode', why='uncaught')"),
        text("done"),
    )
    result = run(fake_llm, tmp_path, tools=[explode, pause, not_json], tool_timeout=1.0)
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert lines[0] == "ToolError | explode raised ValueError: exploded: no fuel"
    assert lines[1] == "ToolError | no host tool named 'nope' (the tools: explode, not_json, pause)"
    assert lines[2] == "ToolTimeout | pause did not finish within 1 s"
    assert lines[3].startswith("ToolError | not_json returned a value that is not JSON")
    assert result.cells[1].status == "error"
    assert result.cells[1].error.ename == "ToolError"
    assert "exploded: uncaught" in result.cells[1].error.evalue
    meta = code_meta(result.notebook)
    assert [c["ok"] for c in meta[0]["tool_calls"]] == [False] * 4
    assert meta[0]["tool_calls"][0]["error"].startswith("explode raised ValueError")


def test_a_call_nobody_listens_to_fails_clearly(fake_llm, tmp_path):
    """A kernel whose host stopped listening (as in a plain notebook run) says so."""
    fake_llm.enqueue(run_cell("x = 1"), text("done"))
    with Agent(settings_for(fake_llm, tmp_path), tools=[lookup]) as agent:
        list(agent.run("one"))
        executor = agent.aio.executor
        executor.comm_handler = None
        started = time.monotonic()
        cell = agent._bg.run(executor.execute("call_tool('lookup', city='Oslo')", timeout=30))
    assert cell.status == "error" and cell.error.ename == "NoHostListening"
    assert "no kernel-agent host acknowledged" in cell.error.evalue
    assert time.monotonic() - started < 10


def test_helpers_survive_a_kernel_restart(fake_llm, tmp_path):
    fake_llm.enqueue(run_cell("x = 1"), text("done"))
    with Agent(settings_for(fake_llm, tmp_path), tools=[lookup]) as agent:
        list(agent.run("one"))
        executor = agent.aio.executor
        agent._bg.run(executor.restart())
        cell = agent._bg.run(
            executor.execute("print(call_tool('lookup', city='Oslo'))", timeout=30)
        )
    assert cell.status == "ok", cell.error
    assert "709000" in cell.outputs[0]["text"]


def test_tool_specs_load_from_modules(tmp_path, monkeypatch):
    (tmp_path / "my_tools.py").write_text(
        "def one(x: int) -> int:\n    'Add one.'\n    return x + 1\n"
        "def two():\n    return 2\n"
        "BOTH = [one, two]\nVALUE = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fns = load_tools(["my_tools:one", "my_tools:BOTH"])
    tools = make_tools(fns)
    assert sorted(tools) == ["one", "two"]
    assert "- `one(x: int) -> int`\n    Add one." in describe_tools(tools)
    for bad, said in [
        ("my_tools", "package.module:name"),
        ("no_such_module_xyz:f", "cannot import"),
        ("my_tools:missing", "has no 'missing'"),
        ("my_tools:VALUE", "is not a function"),
    ]:
        with pytest.raises(ConfigError, match=said):
            load_tools([bad])
    with pytest.raises(ConfigError, match="two host tools"):
        make_tools([_dup1, _dup2])


def _dup1() -> int:
    return 1


def _dup2() -> int:
    return 2


_dup2.__name__ = "_dup1"


def test_tools_result_bound(fake_llm, tmp_path):
    def big() -> str:
        return "x" * 2_000_000

    fake_llm.enqueue(
        run_cell("try:\n    call_tool('big')\nexcept ToolError as e:\n    print(e)"), text("ok")
    )
    result = run(fake_llm, tmp_path, tools=[big])
    said = result.cells[0].outputs[0]["text"]
    assert "over the 1000000 byte bound" in said, said
    assert json.loads(code_meta(result.notebook)[0]["tool_calls"][0]["args"]) == {}


@pytest.mark.parametrize("kind", ["kernel-gateway", "enterprise-gateway"])
def test_the_same_tool_call_through_a_gateway(fake_llm, tmp_path, tmp_path_factory, kind):
    """Comms ride the gateway's websocket: no port or socket of our own is needed."""
    from gateway_server import EnterpriseGateway, KernelGateway, eg_python

    workdir = tmp_path_factory.mktemp(f"{kind}-tools")
    if kind == "enterprise-gateway":
        eg_python()  # a skip saying why when EG was never installed (`make eg-venv`)
        kg = EnterpriseGateway(workdir, "tools-token").start()
    else:
        kg = KernelGateway(workdir, "tools-token").start()
    try:
        CALLS.clear()
        fake_llm.enqueue(
            run_cell(
                "print([call_tool('lookup', city=c)['population'] for c in ('Oslo', 'Lima')])\n"
                "print(call_tools_parallel([('pause', {'seconds': 0.3, 'tag': t}) "
                "for t in 'abcd']))\n"
                "print(call_tool('pause', seconds=2.5, tag='quiet'))\n"  # a cell quiet > 1 s
                "set_result({'ok': True})\n"
                "try:\n"
                "    install_package('anything')\n"
                "except ToolError as e:\n"
                "    print(e)"
            ),
            text("done"),
        )
        settings = settings_for(
            fake_llm,
            tmp_path,
            gateway_url=kg.url,
            gateway_token="tools-token",
            sandbox="none",
            install="allow:otherpkg",  # pip runs in a remote kernel; the policy decides here
        )
        with Agent(settings, tools=[lookup, pause]) as agent:
            events = list(agent.run("use the tools"))
        result = events[-1].result
    finally:
        kg.stop()
    assert result.isolation == "remote"
    assert result.cells[0].status == "ok", result.cells[0].error
    text_out = result.cells[0].outputs[0]["text"]
    assert text_out.startswith("[709000, 10000000]\n['a', 'b', 'c', 'd']\nquiet\n"), text_out
    assert "refused by the install policy 'allow:otherpkg'" in text_out
    quick = [c for c in CALLS if c[0] != "quiet"]
    assert max(s for _, s, _ in quick) < min(e for _, _, e in quick)
    assert result.result == {"ok": True}
    assert [c["tool"] for c in code_meta(result.notebook)[0]["tool_calls"]] == [
        "lookup", "lookup", "pause", "pause", "pause", "pause", "pause", "set_result", "install",
    ]  # fmt: skip


def test_tools_flag_on_the_cli(fake_llm, tmp_path):
    import os
    import subprocess
    import sys

    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    (tools_dir / "cli_tools.py").write_text(
        "def double(x: int) -> int:\n    'Twice x.'\n    return 2 * x\n"
    )
    fake_llm.enqueue(run_cell("print(call_tool('double', x=21))"), text("42"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    env.update(OPENAI_API_KEY="sk-test", KERNEL_AGENT_LEVERS="none", PYTHONPATH=os.pathsep.join(
        [str(tools_dir), env.get("PYTHONPATH", "")]))  # fmt: skip
    nb = tmp_path / "cli.ipynb"
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "run", "--tools", "cli_tools:double",
         "--base-url", fake_llm.base_url, "--model", "m", "--sandbox", SANDBOX,
         "--cwd", str(tmp_path), "--notebook", str(nb), "--format", "json", "double 21"],
        capture_output=True, text=True, env=env, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["cells"][0]["status"] == "ok"
    assert "double(x: int) -> int" in fake_llm.requests[0]["messages"][0]["content"]
    assert code_meta(nb)[0]["tool_calls"][0]["tool"] == "double"

    bad = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "run", "--tools", "nowhere_xyz:f", "x"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "cannot import nowhere_xyz" in bad.stderr
