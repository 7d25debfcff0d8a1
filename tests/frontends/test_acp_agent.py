"""``kernel-agent acp`` through the official ACP SDK's client side: a real subprocess on
stdio, the scripted model, a real kernel."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import nbformat
import pytest
from fake_openai import run_cell, text

acp = pytest.importorskip("acp")
from acp import PROTOCOL_VERSION, text_block  # noqa: E402
from acp.stdio import spawn_agent_process  # noqa: E402
from acp_client import RecordingClient  # noqa: E402
from crossing import SRC as CHECKOUT_SRC  # noqa: E402

pytestmark = pytest.mark.timeout(180)
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid


def env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    return {**clean, "PYTHONPATH": path, "OPENAI_API_KEY": "sk-test"}


async def converse(client: RecordingClient, args: list[str], prompts: list[str], cwd: Path):
    argv = ["-m", "kernel_agent", "acp", *args]
    async with spawn_agent_process(client, sys.executable, *argv, env=env(), cwd=str(cwd)) as (
        conn,
        proc,
    ):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
        stops = []
        for prompt in prompts:
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
            stops.append(response.stop_reason)
        return init, stops


def local(fake, tmp_path: Path) -> list[str]:
    return [
        "--base-url", fake.base_url, "--model", "test", "--sandbox", "none",
        "--cwd", str(tmp_path),
    ]  # fmt: skip


def test_a_prompt_streams_words_reports_each_cell_and_answers(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("n = 6 * 7\nprint(n)"),
        run_cell("1 / 0"),
        run_cell("print(n)"),
        text("The answer is 42."),
    )
    client = RecordingClient()
    init, stops = asyncio.run(
        converse(client, local(fake_llm, tmp_path), ["What is 6 * 7?"], tmp_path)
    )
    assert init.agent_info.name == "kernel-agent" and stops == ["end_turn"]
    calls = client.calls()
    assert list(calls) == ["cell-1", "cell-2", "cell-3"]
    first = calls["cell-1"]
    assert first[0].session_update == "tool_call" and first[0].kind == "execute"
    assert first[0].status == "in_progress" and first[0].raw_input == {
        "code": "n = 6 * 7\nprint(n)"
    }
    assert first[-1].status == "completed" and first[-1].content[0].content.text == "42"
    assert (
        calls["cell-2"][-1].status == "failed"
        and "ZeroDivisionError" in calls["cell-2"][-1].content[0].content.text
    )
    message = client.message()
    assert "The answer is 42." in message and "transcript: " in message
    # the words streamed in pieces, not in one update at the end
    assert sum(1 for k in client.kinds() if k == "agent_message_chunk") >= 3
    transcript = Path(message.split("transcript: ", 1)[1].split(";", 1)[0])
    nbformat.validate(nbformat.read(transcript, as_version=4))


def test_approve_is_a_permission_request_per_cell(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("print('allowed')"),
        run_cell("print('refused')"),
        text("Done."),
    )
    client = RecordingClient(["run", "skip"])
    _, stops = asyncio.run(
        converse(client, [*local(fake_llm, tmp_path), "--approve"], ["go"], tmp_path)
    )
    assert stops == ["end_turn"]
    assert [options for _, options in client.asked] == [["run", "skip", "quit"]] * 2
    assert [call.tool_call_id for call, _ in client.asked] == ["cell-1", "cell-2"]
    calls = client.calls()
    assert calls["cell-1"][0].status == "pending"  # shown before it was allowed
    assert (
        calls["cell-1"][-1].status == "completed"
        and calls["cell-1"][-1].content[0].content.text == "allowed"
    )
    assert (
        calls["cell-2"][-1].status == "failed"
        and calls["cell-2"][-1].content[0].content.text == "skipped"
    )


def test_a_cancelled_permission_stops_the_run_and_the_agent_keeps_serving(fake_llm, tmp_path):
    fake_llm.enqueue(run_cell("print('never')"), run_cell("print('second prompt')"), text("ok"))
    client = RecordingClient([None, "run"])
    _, stops = asyncio.run(
        converse(client, [*local(fake_llm, tmp_path), "--approve"], ["first", "second"], tmp_path)
    )
    assert stops == ["end_turn", "end_turn"]
    outputs = [
        u.content[0].content.text
        for u in client.updates
        if u.session_update == "tool_call_update" and u.status == "completed"
    ]
    assert outputs == ["second prompt"]


def test_a_model_that_fails_is_one_line_to_the_client(fake_llm, tmp_path):
    from fake_openai import unauthorized

    fake_llm.enqueue(unauthorized())
    client = RecordingClient()
    _, stops = asyncio.run(converse(client, local(fake_llm, tmp_path), ["hi"], tmp_path))
    assert stops == ["end_turn"]
    last = client.message().strip().splitlines()[-1]
    assert last.startswith("kernel-agent: ") and ("401" in last or "key" in last), last


def test_cancel_stops_the_run_and_frees_the_kernel(fake_llm, tmp_path):
    import time

    fake_llm.enqueue(
        run_cell("import time\nprint('sleeping', flush=True)\ntime.sleep(60)"),
        run_cell("print('after')"),
        text("done"),
    )
    client = RecordingClient()

    async def main():
        argv = ["-m", "kernel_agent", "acp", *local(fake_llm, tmp_path)]
        async with spawn_agent_process(
            client, sys.executable, *argv, env=env(), cwd=str(tmp_path)
        ) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            first = asyncio.create_task(
                conn.prompt(session_id=session.session_id, prompt=[text_block("sleep")])
            )
            while not any(getattr(u, "status", None) == "in_progress" for u in client.updates):
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
            started = time.monotonic()
            await conn.cancel(session_id=session.session_id)
            stopped = await first
            cancel_s = time.monotonic() - started
            # the kernel is free again: the next prompt's cell runs at once
            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("again")])
            return stopped, cancel_s, second, time.monotonic() - started

    stopped, cancel_s, second, total_s = asyncio.run(main())
    assert stopped.stop_reason == "cancelled" and cancel_s < 15
    assert second.stop_reason == "end_turn" and total_s < 40
    assert "after" in [
        u.content[0].content.text
        for u in client.updates
        if u.session_update == "tool_call_update" and u.status == "completed"
    ]


# ---------------------------------------------------------------- a notebook per session
def _link(uri: str):
    from acp.schema import ResourceContentBlock

    return ResourceContentBlock(type="resource_link", uri=uri, name="n")


@pytest.mark.parametrize(
    "uri",
    ["../secret.ipynb", "a/../../b.ipynb", "dir//x.ipynb", "a\x1bb.ipynb", "./x.ipynb"],
)
def test_a_prompt_cannot_steer_the_session_outside_the_servers_notebooks(uri):
    """The link names a server path: anything that is not one is a one-line ConfigError."""
    from kernel_agent.errors import ConfigError
    from kernel_agent.frontends.acp_agent import _notebook_named

    with pytest.raises(ConfigError):
        _notebook_named([text_block("hi"), _link(uri)])


def test_only_a_plain_server_path_to_a_notebook_names_it():
    from kernel_agent.frontends.acp_agent import _notebook_named

    assert _notebook_named([_link("dir/sales.ipynb")]) == "dir/sales.ipynb"
    assert _notebook_named([_link("/sales.ipynb")]) == "sales.ipynb"
    # another scheme, another kind of file, an endless URI: not a notebook of this server
    for uri in ("file:///etc/x.ipynb", "http://evil/x.ipynb", "data.csv", "a" * 2000 + ".ipynb"):
        assert _notebook_named([_link(uri)]) is None, uri
    assert _notebook_named([text_block("see dir/sales.ipynb")]) is None


def test_a_session_stays_on_its_first_notebook():
    from kernel_agent.errors import ConfigError
    from kernel_agent.frontends.acp_agent import KernelAgentACP
    from kernel_agent.jupyter.attach import JupyterTarget
    from kernel_agent.settings import Settings

    agent = KernelAgentACP(
        Settings.from_env({}), target=JupyterTarget("http://127.0.0.1:9", "", "t")
    )
    session_id = asyncio.run(agent.new_session(cwd="/tmp")).session_id
    session = agent.sessions[session_id]
    with pytest.raises(ConfigError, match="which notebook"):
        agent._bind(session_id, session, [text_block("no link")])
    first = agent._bind(session_id, session, [_link("a.ipynb")])
    assert session.target is not None and session.target.path == "a.ipynb"
    assert agent._bind(session_id, session, [text_block("again")]) is first
    with pytest.raises(ConfigError, match="start a new chat for b.ipynb"):
        agent._bind(session_id, session, [_link("b.ipynb")])
