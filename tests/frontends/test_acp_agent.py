"""``kernel-agent acp`` driven by the official ACP SDK's own client side, over stdio.

Each agent is a real subprocess (``python -m kernel_agent acp``) with real kernels,
talking to the scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest
from crossing import SRC as CHECKOUT_SRC
from fake_openai import FakeLLM, error, run_cell, text

acp = pytest.importorskip("acp")
from acp import schema as S  # noqa: E402

pytestmark = pytest.mark.timeout(180)
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid
SECRET = "sk-acp-secret-0123456789"


class Recorder:
    """An ACP client: records every session update; answers permission requests in turn."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.answers = list(answers or [])
        self.watch: Callable[[Any], None] | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if self.watch is not None:
            self.watch(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> S.RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        choice = self.answers.pop(0)
        return S.RequestPermissionResponse(
            outcome=S.AllowedOutcome(outcome="selected", option_id=choice)
        )

    def on_connect(self, conn: Any) -> None:
        pass

    # what a client without files or terminals answers
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass

    # helpers for the tests
    def calls(self) -> dict[str, list[Any]]:
        """Tool-call id -> its start and updates, in the order they arrived."""
        out: dict[str, list[Any]] = {}
        for u in self.updates:
            if u.session_update in ("tool_call", "tool_call_update"):
                out.setdefault(u.tool_call_id, []).append(u)
        return out

    def said(self) -> str:
        return "".join(
            u.content.text for u in self.updates if u.session_update == "agent_message_chunk"
        )


def content_text(update: Any) -> str:
    return "\n".join(c.content.text for c in (update.content or []) if c.type == "content")


def agent_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "OPENAI_API_KEY": SECRET}


@asynccontextmanager
async def agent(
    client: Recorder, base_url: str, log: Path, *extra: str
) -> AsyncIterator[tuple[Any, Any]]:
    """The agent's stderr goes to ``log`` (printed when a test fails)."""
    args = ["-m", "kernel_agent", "acp", "--base-url", base_url, "--model", "test"]
    args += ["--sandbox", "none", *extra]
    with log.open("wb") as err:
        transport = {"limit": 2**24, "stderr": err.fileno()}
        async with acp.spawn_agent_process(
            client, sys.executable, *args, env=agent_env(), transport_kwargs=transport
        ) as (conn, process):
            try:
                yield conn, process
            finally:
                print(log.read_text(errors="replace")[-5000:], file=sys.stderr)


async def started(conn: Any) -> None:
    init = await conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_info=S.Implementation(name="pytest-acp", version="1.0"),
    )
    assert init.agent_info is not None and init.agent_info.name == "kernel-agent"


async def ask(conn: Any, session_id: str, question: str) -> S.PromptResponse:
    return await conn.prompt(session_id=session_id, prompt=[acp.text_block(question)])


def work_dir(tmp_path: Path) -> Path:
    work = tmp_path / "project"
    work.mkdir()
    (work / "sales.csv").write_text("region,amount\nnorth,10\nsouth,32\nnorth,5\n")
    return work


def test_csv_question_then_a_follow_up_in_the_same_kernel(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.enqueue(
        run_cell(
            "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df['amount'].sum())",
            content="Reading the CSV.",
        ),
        text("The total amount is 47."),
        run_cell("print(df[df.region == 'north'].amount.sum())"),
        text("North sold 15."),
    )
    client = Recorder()
    work = work_dir(tmp_path)

    async def main() -> tuple[Any, Any]:
        async with agent(client, fake_llm.base_url, tmp_path / "agent.log") as (conn, _):
            await started(conn)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            first = await ask(conn, session.session_id, "What is the total amount in sales.csv?")
            second = await ask(conn, session.session_id, "And for the north region?")
            return first, second

    first, second = asyncio.run(main())
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    calls = client.calls()
    assert list(calls) == ["cell-1-1", "cell-2-2"]  # prompt 2 runs step 2
    for updates in calls.values():
        statuses = [u.status for u in updates]
        assert statuses[0] == "pending" and statuses[1] == "in_progress"
        assert statuses.index("completed") == len(statuses) - 1
    first_cell, second_cell = (calls[k][-1] for k in calls)
    assert "read_csv('sales.csv')" in content_text(first_cell) and "47" in content_text(first_cell)
    assert "15" in content_text(second_cell)  # the follow-up used the first prompt's df
    assert first_cell.raw_output["status"] == "ok"
    said = client.said()
    assert "Reading the CSV." in said
    assert "The total amount is 47." in said and "North sold 15." in said
    # the footer names the notebooks, which are under the session's cwd
    notebooks = sorted((work / "notebooks").glob("*-acp-*.ipynb"))
    transcript = next(p for p in notebooks if not p.stem.endswith("clean"))
    assert str(transcript) in said
    nb = nbformat.read(transcript, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert any("read_csv" in s for s in sources) and any("north" in s for s in sources)
    assert all(
        json.dumps(c.metadata).count('"source": "acp"') for c in nb.cells if c.cell_type == "code"
    )
    assert any("clean" in p.stem for p in notebooks)
    assert "clean notebook" in said
    fake_llm.assert_drained()
    # the model was shown what the kernel printed
    shown = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "47" in shown[-1]["content"]
    # the follow-up's model call holds the first question and answer: one conversation
    follow_up = json.dumps(fake_llm.requests[2]["messages"])
    assert "What is the total amount in sales.csv?" in follow_up
    assert "The total amount is 47." in follow_up


def test_approve_asks_before_each_cell_and_a_reject_skips_it(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.enqueue(
        run_cell("marker = 'first'\nprint('ran-first')"),
        run_cell("print('ran-second')"),
        run_cell("print('ran-third', 'marker' in dir())"),
        text("Done."),
    )
    client = Recorder(["reject_once", "allow_always"])
    work = work_dir(tmp_path)

    async def main() -> Any:
        async with agent(client, fake_llm.base_url, tmp_path / "agent.log", "--approve") as (
            conn,
            _,
        ):
            await started(conn)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            return await ask(conn, session.session_id, "Do three things.")

    reply = asyncio.run(main())
    assert reply.stop_reason == "end_turn"
    # asked twice: the third cell ran under "allow always"
    assert len(client.permissions) == 2
    tool_call, options = client.permissions[0]
    assert "marker = 'first'" in content_text(tool_call)
    assert {o.kind for o in options} == {
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    }
    calls = client.calls()
    skipped = calls["cell-1-1"][-1]
    assert skipped.status == "failed" and "skipped" in content_text(skipped)
    assert [u.status for u in calls["cell-1-1"]] == ["pending", "failed"]
    assert calls["cell-1-2"][-1].status == "completed"
    assert "ran-third False" in content_text(calls["cell-1-3"][-1])  # cell 1 never ran
    # the model heard that the cell was skipped; it never ran
    tool_msgs = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "skipped" in tool_msgs[-1]["content"]


def test_cancel_interrupts_a_long_cell_and_the_kernel_keeps_its_state(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.enqueue(
        run_cell("import time\nx = 41\nprint('sleeping', flush=True)\ntime.sleep(300)"),
        run_cell("print(x + 1)"),
        text("It is 42."),
    )
    client = Recorder()
    work = work_dir(tmp_path)

    async def main() -> tuple[Any, Any, float]:
        async with agent(client, fake_llm.base_url, tmp_path / "agent.log") as (conn, _):
            await started(conn)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            running = asyncio.Event()
            client.watch = lambda u: (
                running.set() if getattr(u, "status", None) == "in_progress" else None
            )
            prompt = asyncio.ensure_future(ask(conn, session.session_id, "Sleep."))
            await asyncio.wait_for(running.wait(), 60)
            await asyncio.sleep(1.0)
            began = time.monotonic()
            await conn.cancel(session_id=session.session_id)
            first = await asyncio.wait_for(prompt, 30)
            took = time.monotonic() - began
            second = await ask(conn, session.session_id, "What is x + 1?")
            return first, second, took

    first, second, took = asyncio.run(main())
    print(f"cancel took {took:.2f} s")
    assert first.stop_reason == "cancelled" and took < 20
    calls = client.calls()
    assert calls["cell-1-1"][-1].status == "failed"
    assert "interrupted" in content_text(calls["cell-1-1"][-1])
    assert second.stop_reason == "end_turn"
    second_call = [k for k in calls if k.startswith("cell-2-")]
    assert len(second_call) == 1 and "42" in content_text(calls[second_call[0]][-1])  # x kept


@pytest.mark.parametrize("endpoint", ["unreachable", "401"])
def test_model_errors_are_clean_acp_errors_and_the_agent_lives_on(
    fake_llm: FakeLLM, tmp_path: Path, endpoint: str
) -> None:
    client = Recorder()
    work = work_dir(tmp_path)
    url, expected = "http://127.0.0.1:9/v1", "reach"
    if endpoint == "401":
        for _ in range(4):
            fake_llm.enqueue(error(401, "Incorrect API key", code="invalid_api_key"))
        url, expected = fake_llm.base_url, "API key"

    async def main() -> tuple[Any, Any]:
        async with agent(client, url, tmp_path / "agent.log") as (conn, process):
            await started(conn)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            with pytest.raises(acp.RequestError) as caught:
                await ask(conn, session.session_id, "Anything?")
            # still serving: a bad cwd is a clean error too
            with pytest.raises(acp.RequestError) as bad_cwd:
                await conn.new_session(cwd="relative/dir", mcp_servers=[])
            assert process.returncode is None
            return caught.value, bad_cwd.value

    error_, bad_cwd = asyncio.run(main())
    message = str(error_)
    assert message.startswith("kernel-agent: ") and "\n" not in message
    assert "Traceback" not in message and len(message) < 400
    assert expected in message
    assert SECRET not in message
    assert bad_cwd.code == -32602


@pytest.mark.parametrize(
    "text",
    ["plain", "```\n![x](http://e/x)\n```", "a ```` b ````` c", "`", "```python\n`x`\n" * 50],
)
def test_a_fence_is_longer_than_any_backtick_run_inside_it(text: str) -> None:
    from kernel_agent.frontends.acp_agent import fenced, fenced_inline

    block = fenced(text, "python")
    fence = block.split("\n", 1)[0].removesuffix("python")
    assert block == f"{fence}python\n{text}\n{fence}" and fence not in text
    span = fenced_inline(text)
    ticks = span.split(" ", 1)[0]
    assert set(ticks) == {"`"} and ticks not in text and span.endswith(ticks)


HOSTILE = [
    # terminal escapes, bidi override, a backtick run, then 10 MB in one print
    "print('\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J \\u202e ```` [x](http://evil.example/a) '"
    " + 'A' * 10_000_000)",
    # a display whose text is huge and ends in a markdown image; stderr with ANSI colours
    "import sys\nfrom IPython.display import display\n"
    "display({'text/plain': 'B' * 3_000_000 + '![i](http://evil.example/p.png)\\x1b[31m'},"
    " raw=True)\nprint('\\x1b[1;31mbad\\u200b\\x9b' * 100_000, file=sys.stderr)",
]


@pytest.mark.parametrize("code", HOSTILE, ids=["escapes-and-10MB", "display-and-error"])
def test_hostile_outputs_reach_the_client_bounded_escaped_and_fenced(
    fake_llm: FakeLLM, tmp_path: Path, code: str
) -> None:
    fake_llm.enqueue(run_cell(code), text("Printed it."))
    client = Recorder()
    work = work_dir(tmp_path)

    async def main() -> Any:
        async with agent(client, fake_llm.base_url, tmp_path / "agent.log") as (conn, _):
            await started(conn)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            return await ask(conn, session.session_id, "Print things.")

    reply = asyncio.run(main())
    assert reply.stop_reason == "end_turn"
    for update in client.updates:
        wire = update.model_dump_json(by_alias=True)
        assert len(wire) < 64_000
        shown = json.loads(wire)
        blob = json.dumps(shown, ensure_ascii=False)
        for char in ("\x1b", "\u202e", "\u200b", "\x9b", "\x07"):
            assert char not in blob
    final = client.calls()["cell-1-1"][-1]
    assert final.status in ("completed", "failed")
    for block in final.content or []:
        body = block.content.text
        fence = body.split("\n", 1)[0].rstrip("python")
        assert set(fence) == {"`"} and body.endswith(fence)
        assert body.count(fence) == 2  # nothing inside closes the fence
    assert "characters cut" in content_text(final)


# ---------------------------------------------------------------- a notebook per session
def _link(uri: str) -> Any:
    return S.ResourceContentBlock(type="resource_link", uri=uri, name="n")


@pytest.mark.parametrize(
    "uri",
    ["../secret.ipynb", "a/../../b.ipynb", "dir//x.ipynb", "a\x1bb.ipynb", "./x.ipynb"],
)
def test_a_prompt_cannot_steer_the_session_outside_the_servers_notebooks(uri: str) -> None:
    """The link names a server path: anything that is not one is a one-line ConfigError."""
    from kernel_agent.errors import ConfigError
    from kernel_agent.frontends.acp_text import notebook_named

    with pytest.raises(ConfigError):
        notebook_named([acp.text_block("hi"), _link(uri)])


def test_only_a_plain_server_path_to_a_notebook_names_it() -> None:
    from kernel_agent.frontends.acp_text import notebook_named

    assert notebook_named([_link("dir/sales.ipynb")]) == "dir/sales.ipynb"
    assert notebook_named([_link("/sales.ipynb")]) == "sales.ipynb"
    # another scheme, another kind of file, an endless URI: not a notebook of this server
    for uri in ("file:///etc/x.ipynb", "http://evil/x.ipynb", "data.csv", "a" * 2000 + ".ipynb"):
        assert notebook_named([_link(uri)]) is None, uri
    assert notebook_named([acp.text_block("see dir/sales.ipynb")]) is None


def test_a_session_stays_on_its_first_notebook(tmp_path: Path) -> None:
    from kernel_agent.errors import ConfigError
    from kernel_agent.frontends.acp_agent import KernelAgentAcp
    from kernel_agent.jupyter.attach import JupyterTarget
    from kernel_agent.settings import Settings

    agent = KernelAgentAcp(
        Settings.from_env({}), target=JupyterTarget("http://127.0.0.1:9", "", "t")
    )
    session_id = asyncio.run(agent.new_session(cwd=str(tmp_path))).session_id
    entry = agent.sessions[session_id]
    assert entry.agent is None
    with pytest.raises(ConfigError, match="which notebook"):
        agent._bind(entry, session_id, [acp.text_block("no link")])
    first = agent._bind(entry, session_id, [_link("a.ipynb")])
    assert entry.target is not None and entry.target.path == "a.ipynb"
    assert agent._bind(entry, session_id, [acp.text_block("again")]) is first
    with pytest.raises(ConfigError, match="start a new chat for b.ipynb"):
        agent._bind(entry, session_id, [_link("b.ipynb")])
