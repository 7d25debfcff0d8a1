"""``kernel-agent acp --jupyter-url``: an ACP client (the SDK's client side) asks about a CSV,
and the cells appear and run in the notebook open on a real JupyterLab."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest
from fake_openai import run_cell, text
from lab_server import LabServer, as_the_user, write_notebook

acp = pytest.importorskip("acp")
from acp import PROTOCOL_VERSION, text_block  # noqa: E402
from acp.stdio import spawn_agent_process  # noqa: E402
from acp_client import RecordingClient  # noqa: E402
from crossing import SRC as CHECKOUT_SRC  # noqa: E402

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


def test_a_question_about_a_csv_runs_in_the_open_notebook(lab, fake_llm, tmp_path):
    (lab.root / "sales.csv").write_text("region,amount\nnorth,10\nsouth,25\nnorth,7\n")
    write_notebook(lab.root / "analysis.ipynb", "import pandas as pd")
    kernel_id = lab.open_session("analysis.ipynb")
    fake_llm.enqueue(
        run_cell(
            "df = pd.read_csv('sales.csv')\nprint(df.groupby('region')['amount'].sum().idxmax())"
        ),
        text("South has the highest total sales."),  # only what a cell printed
    )
    client = RecordingClient(["allow_once"])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "KERNEL_AGENT_", "JUPYTER"))
    }
    env.update(PYTHONPATH=SRC, OPENAI_API_KEY="sk-test", JUPYTER_TOKEN=lab.token)

    async def main():
        argv = [
            "-m", "kernel_agent", "acp", "--jupyter-url", lab.url, "--notebook", "analysis.ipynb",
            "--base-url", fake_llm.base_url, "--model", "test", "--approve",
        ]  # fmt: skip
        async with spawn_agent_process(
            client, sys.executable, *argv, env=env, cwd=str(tmp_path)
        ) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            # the user's own cell ran before the question (pd is in the kernel)
            response = await conn.prompt(
                session_id=session.session_id,
                prompt=[text_block("Which region in sales.csv has the highest total amount?")],
            )
        server = JupyterServer(lab.url, lab.token, "analysis.ipynb")
        doc = SharedNotebook(await server.room_url(), server.headers)
        await doc.open()
        cells = doc.cells()
        await doc.close()
        return response, cells

    # as the user: run the notebook's first cell in its kernel
    as_the_user(lab, "analysis.ipynb", "import pandas as pd")
    response, cells = asyncio.run(main())
    assert response.stop_reason == "end_turn"
    assert "South has the highest total sales." in client.message()
    assert client.asked and client.asked[0][0].title == "Run cell 1 in analysis.ipynb"
    report = client.calls()["cell-1-1"]
    assert report[-1].status == "completed" and report[-1].raw_output["output"] == "south"
    mine = [c for c in cells if c["metadata"].get("kernel_agent")]
    assert len(mine) == 1 and mine[0]["outputs"][0]["text"] == "south\n"
    assert cells[0]["source"] == "import pandas as pd"
    assert lab.session_kernel("analysis.ipynb") == kernel_id
    # the model saw the notebook's cell and the kernel's pd
    asked = json.dumps(fake_llm.requests[0]["messages"])
    assert "import pandas as pd" in asked and "analysis.ipynb" in asked
