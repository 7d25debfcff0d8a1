"""``kernel-agent mcp`` through the official SDK's real client, over stdio and streamable HTTP.

Each server is a real subprocess (``python -m kernel_agent mcp``) with a real kernel,
sandboxed by default as in ``run`` (bwrap where the host allows it).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest

mcp = pytest.importorskip("mcp")
import mcp_types as types  # noqa: E402
from crossing import host_pythonpath  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from kernel_agent.frontends.mcp_server import CLEAN_URI, NOTEBOOK_URI, TOOLS  # noqa: E402
from kernel_agent.sandbox import bwrap_problem  # noqa: E402

pytestmark = pytest.mark.timeout(180)
SANDBOXED = bwrap_problem()[0] is None
SECRET = "sk-server-secret-0123456789"
TOKEN = "test-token-abcdefghijklmnopqrstuvwxyz"
CLIENT = types.Implementation(name="pytest-outside-agent", version="9.9.9")


def server_env(**extra: str) -> dict[str, str]:
    """Our environment, this checkout's sources first, and secrets the kernel must never see."""
    path = host_pythonpath()
    return {**os.environ, "PYTHONPATH": path, "OPENAI_API_KEY": SECRET, **extra}


def server_args(tmp_path: Path, *extra: str) -> list[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    nb = tmp_path / "nb" / "session.ipynb"
    return [
        "-m",
        "kernel_agent",
        "mcp",
        "--cwd",
        str(work),
        "--notebook",
        str(nb),
        "--heartbeat",
        "0.5",
        *extra,
    ]


def stdio_client(tmp_path: Path, *extra: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=server_args(tmp_path, *extra), env=server_env()
    )
    return Client(params, client_info=CLIENT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(
    tmp_path: Path, *extra: str, token: str | None = TOKEN
) -> Iterator[tuple[str, subprocess.Popen[str], list[str]]]:
    """A ``--http`` server subprocess; yields (url, process, its stderr lines so far)."""
    port = free_port()
    args = [sys.executable, *server_args(tmp_path, "--http", "--port", str(port), *extra)]
    env = server_env(**({"KERNEL_AGENT_MCP_TOKEN": token} if token else {}))
    proc = subprocess.Popen(
        args, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "serving on http" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while not ready.is_set():
            assert proc.poll() is None, f"server exited: {''.join(lines)}"
            assert time.monotonic() < deadline, f"server did not start: {''.join(lines)}"
            time.sleep(0.05)
        for _ in range(100):  # uvicorn binds right after the line
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc, lines
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def http_client(url: str, token: str | None = TOKEN) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return Client(transport, client_info=CLIENT)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def ok(
    client: Client, name: str, args: dict[str, Any] | None = None, **kw: Any
) -> types.CallToolResult:
    result = await client.call_tool(name, args or {}, **kw)
    assert not result.is_error, f"{name}: {text_of(result)}"
    return result


async def refused(client: Client, name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, f"{name} {args} was not refused: {text_of(result)}"
    message = text_of(result)
    assert "\n" not in message and message.strip()
    return message


def notebook(tmp_path: Path) -> Any:
    nb = nbformat.read(tmp_path / "nb" / "session.ipynb", as_version=4)
    nbformat.validate(nb)
    return nb


# ------------------------------------------------------------------------ stdio
def test_every_tool_over_stdio(tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with stdio_client(tmp_path) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            seen["tools"] = listed
            seen["run"] = await ok(
                c,
                "run_cell",
                {
                    "code": "import pandas as pd\ndf = pd.DataFrame({'n': range(5)})\nprint(df.n.sum())"
                },
            )
            seen["plot"] = await ok(
                c,
                "run_cell",
                {
                    "code": "import matplotlib.pyplot as plt\nplt.figure(figsize=(20, 10), dpi=100)\nplt.plot([1, 3, 2])\nplt.show()"
                },
            )
            seen["env"] = await ok(
                c,
                "run_cell",
                {
                    "code": "import os\nprint(sorted(k for k, v in os.environ.items() if 'KEY' in k or 'sk-' in v))"
                },
            )
            seen["error"] = await ok(c, "run_cell", {"code": "undefined_name + 1"})
            seen["vars"] = await ok(c, "list_variables")
            seen["notebook"] = await ok(c, "read_notebook")
            seen["clean"] = await ok(c, "read_notebook", {"clean": True})
            seen["cell"] = await ok(c, "read_cell", {"index": 0})
            seen["no_cell"] = await refused(c, "read_cell", {"index": 99})
            seen["bad_args"] = await refused(c, "run_cell", {"code": "1", "timeout": -1})
            seen["unknown"] = await refused(c, "no_such_tool", {})
            seen["write"] = await ok(
                c, "write_file", {"path": "data/input.csv", "content": "a,b\n1,2\n"}
            )
            seen["read"] = await ok(c, "read_file", {"path": "data/input.csv"})
            seen["files"] = await ok(c, "list_files")
            long = asyncio.ensure_future(
                ok(c, "run_cell", {"code": "import time\nfor _ in range(400): time.sleep(0.05)"})
            )
            await asyncio.sleep(1.5)
            seen["interrupt"] = await ok(c, "interrupt_kernel")
            seen["interrupted"] = await long
            seen["restart"] = await ok(c, "restart_kernel", {"rebuild": True})
            seen["after"] = await ok(c, "run_cell", {"code": "print(len(df))"})
            seen["verify"] = await ok(c, "verify_notebook")
            seen["export"] = await ok(c, "export_notebook", {"to": "markdown"})
            resources = await c.list_resources()
            seen["resources"] = {str(r.uri) for r in resources.resources}
            seen["resource"] = await c.read_resource(NOTEBOOK_URI)
            seen["clean_resource"] = await c.read_resource(CLEAN_URI)
        return seen

    seen = asyncio.run(main())
    tools = seen["tools"]
    assert set(tools) == {t.name for t in TOOLS}
    assert tools["run_cell"].input_schema["required"] == ["code"]
    assert all(t.description and t.input_schema["type"] == "object" for t in tools.values())
    assert tools["list_files"].annotations.read_only_hint is True

    run = seen["run"]
    assert "10" in text_of(run) and "new: df (DataFrame, shape (5, 1), columns n)" in text_of(run)
    assert (
        run.structured_content["status"] == "ok" and run.structured_content["execution_count"] == 1
    )

    images = [c for c in seen["plot"].content if isinstance(c, types.ImageContent)]
    assert len(images) == 1 and images[0].mime_type in ("image/png", "image/jpeg")
    from kernel_agent.edges.images import MAX_SIDE, bound_image

    shown = bound_image(images[0].mime_type, images[0].data)
    assert (
        shown is not None and max(shown.width, shown.height) <= MAX_SIDE
    )  # a 2000x1000 figure, downscaled

    assert text_of(seen["env"]).strip().endswith("[]")  # no key, no secret value reached the kernel
    assert (
        "NameError" in text_of(seen["error"])
        and seen["error"].structured_content["status"] == "error"
    )
    assert "df (DataFrame" in text_of(seen["vars"])
    assert seen["vars"].structured_content["variables"][0]["columns"] == ["n"]
    assert "[0] In [1] ok" in text_of(seen["notebook"]) and "NameError" in text_of(seen["notebook"])
    assert "NameError" not in text_of(seen["clean"])
    assert "import pandas" in text_of(seen["cell"])
    assert "no cell 99" in seen["no_cell"]
    assert "timeout" in seen["bad_args"] and "no_such_tool" in seen["unknown"]
    assert text_of(seen["read"]) == "a,b\n1,2\n"
    assert "data/input.csv  file  8 bytes" in text_of(seen["files"])
    assert "Interrupt sent" in text_of(seen["interrupt"])
    assert "KeyboardInterrupt" in text_of(seen["interrupted"])
    assert "survived: df" in text_of(seen["restart"])
    assert text_of(seen["after"]).splitlines()[1] == "5"
    assert seen["verify"].structured_content["verdict"] == "reproduced", text_of(seen["verify"])
    exported = Path(seen["export"].structured_content["path"])
    assert exported.suffix == ".md" and "import pandas" in exported.read_text()
    assert seen["resources"] == {NOTEBOOK_URI, CLEAN_URI}
    assert "".join(json.loads(seen["resource"].contents[0].text)["cells"][0]["source"]).startswith(
        "import pandas"
    )
    assert "NameError" not in seen["clean_resource"].contents[0].text

    nb = notebook(tmp_path)
    first = nb.cells[0].metadata["kernel_agent"]
    assert first["source"] == "mcp" and first["tool"] == "run_cell"
    assert first["client"] == {"name": CLIENT.name, "version": CLIENT.version}
    assert first["status"] == "ok" and first["exec_s"] >= 0 and first["started"] <= first["ended"]
    session = nb.metadata["kernel_agent"]["session"]
    assert (
        session["front_end"] == "mcp"
        and {"name": CLIENT.name, "version": CLIENT.version, "transport": "stdio"}
        in session["clients"]
    )
    assert session["ended"]
    if SANDBOXED:
        assert nb.metadata["kernel_agent"]["sandbox"]["mode"] == "bwrap"


def test_file_tools_refuse_escapes(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("not yours")

    async def main() -> list[str]:
        async with stdio_client(tmp_path) as c:
            await ok(
                c,
                "run_cell",
                {
                    "code": "import os\nos.symlink('..', 'up')\nos.symlink('/etc/hostname', 'host')\nos.mkdir('d')"
                },
            )
            return [
                await refused(c, "read_file", {"path": "../outside.txt"}),
                await refused(c, "read_file", {"path": "/etc/hostname"}),
                await refused(c, "read_file", {"path": "up/outside.txt"}),
                await refused(c, "read_file", {"path": "host"}),
                await refused(c, "write_file", {"path": "up/planted.txt", "content": "x"}),
                await refused(c, "write_file", {"path": "../planted.txt", "content": "x"}),
                await refused(c, "write_file", {"path": "/tmp/planted.txt", "content": "x"}),
                await refused(c, "read_file", {"path": "d"}),
            ]

    messages = asyncio.run(main())
    assert "'..'" in messages[0] and "absolute" in messages[1]
    assert "symlink" in messages[2] and "symlink" in messages[3] and "symlink" in messages[4]
    assert not (tmp_path / "planted.txt").exists() and not Path("/tmp/planted.txt").exists()


def test_timeout_then_kernel_death_with_rebuild(tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        async with stdio_client(tmp_path, "--cell-timeout", "60") as c:
            await ok(c, "run_cell", {"code": "import os\nbase = 21"})
            slow = await ok(
                c, "run_cell", {"code": "import time\nwhile True: time.sleep(0.05)", "timeout": 1}
            )
            died = await ok(c, "run_cell", {"code": "os.kill(os.getpid(), 9)"})
            after = await ok(c, "run_cell", {"code": "print(base * 2)"})
            return {"slow": slow, "died": died, "after": after}

    seen = asyncio.run(main())
    assert seen["slow"].structured_content["status"] == "timeout" and "1 s timeout" in text_of(
        seen["slow"]
    )
    died = seen["died"]
    assert died.structured_content["status"] == "died" and died.structured_content["restarted"]
    assert "rebuilt by replaying" in text_of(died) and "survived: base" in text_of(died)
    assert "42" in text_of(seen["after"])
    nb = notebook(tmp_path)
    assert [c.metadata["kernel_agent"].get("status") for c in nb.cells if c.cell_type == "code"][
        :3
    ] == ["ok", "timeout", "died"]


# ------------------------------------------------------------------------- HTTP
def test_http_token_progress_and_kill_mid_cell(tmp_path: Path) -> None:
    import httpx2

    with http_server(tmp_path) as (url, proc, lines):
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        assert httpx2.post(url, json=init, headers=headers).status_code == 401
        wrong = httpx2.post(url, json=init, headers={**headers, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "invalid_token" in wrong.text

        async def refused_client() -> None:
            async with http_client(url, token="wrong"):
                pass

        with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in an exception group
            asyncio.run(refused_client())

        progress: list[tuple[float, str | None]] = []

        async def main() -> types.CallToolResult:
            async with http_client(url) as c:
                await ok(c, "run_cell", {"code": "kept = 'before the kill'"})

                async def on_progress(
                    value: float, total: float | None, message: str | None
                ) -> None:
                    progress.append((value, message))

                long = await ok(
                    c,
                    "run_cell",
                    {"code": "import time\ntime.sleep(2.2)\nprint('slept')"},
                    progress_callback=on_progress,
                )
                return long

        long = asyncio.run(main())
        assert "slept" in text_of(long)
        assert (
            len(progress) >= 3
            and progress == sorted(progress)
            and "cell running" in (progress[-1][1] or "")
        )

        async def hang() -> None:
            async with http_client(url) as c:
                task = asyncio.ensure_future(
                    c.call_tool("run_cell", {"code": "import time\ntime.sleep(120)"})
                )
                await asyncio.sleep(1.5)
                proc.kill()  # SIGKILL mid-cell: no cleanup runs
                with pytest.raises(BaseException):  # noqa: B017
                    await asyncio.wait_for(task, 20)

        try:
            asyncio.run(hang())
        except BaseException:  # the transport may fail on its way out too
            pass
        proc.wait(20)

    nb = notebook(tmp_path)  # valid nbformat
    codes = [c for c in nb.cells if c.cell_type == "code"]
    assert (
        codes[0].source == "kept = 'before the kill'"
        and codes[0].metadata["kernel_agent"]["status"] == "ok"
    )
    assert codes[-1].source == "import time\ntime.sleep(120)"
    assert codes[-1].metadata["kernel_agent"]["status"] == "running"  # in flight when killed
    client = codes[0].metadata["kernel_agent"]["client"]
    assert client == {"name": CLIENT.name, "version": CLIENT.version}


def test_no_auth_is_loud_and_loopback_only(tmp_path: Path) -> None:
    env = server_env()
    far = subprocess.run(
        [sys.executable, *server_args(tmp_path, "--http", "--no-auth", "--host", "0.0.0.0")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert far.returncode == 2 and "only allowed on a loopback address" in far.stderr

    with http_server(tmp_path, "--no-auth", token=None) as (url, _, lines):

        async def main() -> str:
            async with http_client(url, token=None) as c:
                return text_of(await ok(c, "run_cell", {"code": "print(6 * 7)"}))

        assert "42" in asyncio.run(main())
        assert any("WARNING: --no-auth" in line for line in lines)


# ------------------------------------------------------------- an outside agent
def _openai_tools(listed: list[types.Tool]) -> list[dict[str, Any]]:
    """MCP tools as OpenAI function tools, the way an outside agent offers them to its model."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in listed
    ]


async def outside_agent(client: Client, llm: Any, task: str, max_turns: int = 10) -> str:
    """A minimal MCP host: the model (through the real openai client) calls tools until it answers."""
    tools = _openai_tools((await client.list_tools()).tools)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for _ in range(max_turns):
        reply = (
            (await llm.chat.completions.create(model="fake", messages=messages, tools=tools))
            .choices[0]
            .message
        )
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply.model_dump(exclude_none=True))
        for tool_call in reply.tool_calls:
            result = await client.call_tool(
                tool_call.function.name, json.loads(tool_call.function.arguments)
            )
            messages.append(
                {"role": "tool", "tool_call_id": tool_call.id, "content": text_of(result)}
            )
    raise AssertionError("the outside agent did not finish")


def test_outside_agent_solves_a_task_and_leaves_a_verified_notebook(
    tmp_path: Path, fake_llm: Any
) -> None:
    import openai
    from fake_openai import call, run_cell, text, tool_reply

    fake_llm.enqueue(
        tool_reply(call("write_file", {"path": "numbers.csv", "content": "n\n3\n4\n5\n"})),
        run_cell(
            "import pandas as pd\nframe = pd.read_csv('numbers.csv')\nprint(frame.n.pow(2).sum())"
        ),
        run_cell("frame.n.mean("),  # a typo: the model sees the SyntaxError and moves on
        tool_reply(call("verify_notebook", {})),
        text("The sum of the squares is 50, and the notebook reproduces."),
    )

    async def main() -> str:
        llm = openai.AsyncOpenAI(
            base_url=fake_llm.base_url, api_key="sk-outside-agent", max_retries=0
        )
        try:
            async with stdio_client(tmp_path) as c:
                return await outside_agent(c, llm, "Sum the squares of n in numbers.csv")
        finally:
            await llm.close()

    answer = asyncio.run(main())
    assert "50" in answer
    fake_llm.assert_drained()
    shown = [m for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"]
    assert "50" in shown[-1]["content"] and "frame (DataFrame" in shown[-1]["content"]
    assert (
        "SyntaxError"
        in [m for m in fake_llm.requests[3]["messages"] if m["role"] == "tool"][-1]["content"]
    )
    verdict = [m for m in fake_llm.requests[4]["messages"] if m["role"] == "tool"][-1]["content"]
    assert verdict.startswith("reproduced")
    clean = nbformat.read(tmp_path / "nb" / "session.clean.ipynb", as_version=4)
    nbformat.validate(clean)
    assert clean.metadata["kernel_agent"]["verify"]["verdict"] == "reproduced"
    assert [c.source for c in clean.cells if c.cell_type == "code"] == [
        "import pandas as pd\nframe = pd.read_csv('numbers.csv')\nprint(frame.n.pow(2).sum())"
    ]
