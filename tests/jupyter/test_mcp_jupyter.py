"""``kernel-agent mcp --jupyter-url``: the official MCP SDK's real client, through a real
``kernel-agent mcp`` subprocess, working in a notebook open on a real JupyterLab."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from lab_server import LabServer, write_notebook

mcp = pytest.importorskip("mcp")
import mcp_types as types  # noqa: E402
from crossing import SRC as CHECKOUT_SRC  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from kernel_agent.jupyter.server import JupyterServer  # noqa: E402
from kernel_agent.jupyter.shared_doc import SharedNotebook  # noqa: E402

pytestmark = pytest.mark.timeout(240)
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid


@pytest.fixture
def lab(tmp_path):
    server = LabServer(tmp_path / "lab").start()
    try:
        yield server
    finally:
        server.stop()


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def client(lab: LabServer, tmp_path: Path, path: str, token: str) -> Client:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNEL_AGENT_", "JUPYTER"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    env["LAB_TOKEN_FOR_TEST"] = token
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m", "kernel_agent", "mcp", "--jupyter-url", lab.url, "--notebook", path,
            "--jupyter-token-env", "LAB_TOKEN_FOR_TEST",
            "--transcript", str(tmp_path / "mcp-t.ipynb"),
        ],
        env=env,
    )  # fmt: skip
    return Client(params, client_info=types.Implementation(name="pytest", version="1"))


def test_an_outside_agent_works_in_the_open_notebook(lab, tmp_path):
    write_notebook(lab.root / "m.ipynb", "base = 10")
    kernel_id = lab.open_session("m.ipynb")

    async def main():
        seen = {}
        async with client(lab, tmp_path, "m.ipynb", lab.token) as c:
            seen["instructions"] = c.instructions
            # the user's cell runs first (as the user would, in JupyterLab) ...
            await c.call_tool("run_cell", {"code": "base = 10"})
            seen["run"] = await c.call_tool("run_cell", {"code": "print(base * 4)"})
            seen["vars"] = await c.call_tool("list_variables", {})
            seen["nb"] = await c.call_tool("read_notebook", {})
            seen["verify"] = await c.call_tool("verify_notebook", {})
        server = JupyterServer(lab.url, lab.token, "m.ipynb")
        doc = SharedNotebook(await server.room_url(), server.headers)
        await doc.open()
        seen["cells"] = doc.cells()
        await doc.close()
        return seen

    seen = asyncio.run(main())
    assert "open in JupyterLab" in seen["instructions"] and "UNSANDBOXED" in seen["instructions"]
    run = seen["run"]
    assert not run.is_error and run.structured_content["status"] == "ok", text_of(run)
    assert "40" in text_of(run)
    assert "base" in json.dumps(seen["vars"].structured_content)
    assert "base = 10" in text_of(seen["nb"])  # the notebook's own cell is in the transcript
    assert seen["verify"].structured_content["verdict"] == "reproduced", text_of(seen["verify"])
    cells = seen["cells"]
    assert cells[0]["source"] == "base = 10" and not cells[0]["metadata"].get("kernel_agent")
    mine = [c for c in cells if c["metadata"].get("kernel_agent")]
    assert [c["source"] for c in mine] == ["base = 10", "print(base * 4)"]
    assert mine[-1]["outputs"][0]["text"] == "40\n"
    assert lab.session_kernel("m.ipynb") == kernel_id  # the user's kernel, left running
    nbformat.validate(nbformat.read(tmp_path / "mcp-t.ipynb", as_version=4))


def test_a_wrong_token_ends_the_server_with_one_line(lab, tmp_path):
    import subprocess

    write_notebook(lab.root / "w.ipynb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNEL_AGENT_", "JUPYTER"))}
    env["PYTHONPATH"] = SRC
    env["JUPYTER_TOKEN"] = "wrong"
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "mcp", "--jupyter-url", lab.url, "--notebook", "w.ipynb"],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("kernel-agent: WARNING: the model's code runs UNSANDBOXED")
    assert len(lines) == 2 and "refused a wrong token" in lines[1], proc.stderr
