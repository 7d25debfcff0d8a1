"""``kernel-agent run --jupyter-url``: the real CLI on the scripted model, writing into a
notebook that is open in a real JupyterLab (and in headless Chromium)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import nbformat
import pytest
from fake_openai import run_cell, text
from lab_server import LabBrowser, LabServer, as_the_user, write_notebook

from kernel_agent.jupyter.server import JupyterServer
from kernel_agent.jupyter.shared_doc import SharedNotebook

pytestmark = pytest.mark.timeout(240)

USER_CELL = "import pandas as pd\ndf = pd.DataFrame({'v': [1, 2, 3]})"


@pytest.fixture
def lab(tmp_path):
    server = LabServer(tmp_path / "lab").start()
    try:
        yield server
    finally:
        server.stop()


def cli(lab, fake, *args, token=None, **popen):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "KERNEL_AGENT_", "JUPYTER"))
    }
    env["JUPYTER_TOKEN"] = lab.token if token is None else token
    env["OPENAI_API_KEY"] = "sk-test"
    argv = [
        sys.executable, "-m", "kernel_agent", "run", "--jupyter-url", lab.url,
        "--base-url", fake.base_url, "--model", "test", *args,
    ]  # fmt: skip
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def document_cells(lab: LabServer, path: str) -> list[dict]:
    async def read():
        server = JupyterServer(lab.url, lab.token, path)
        doc = SharedNotebook(await server.room_url(), server.headers)
        await doc.open()
        try:
            return doc.cells()
        finally:
            await doc.close()

    return asyncio.run(read())


def test_the_agent_works_in_the_notebook_open_in_jupyterlab(lab, fake_llm, tmp_path):
    write_notebook(lab.root / "work" / "sales.ipynb", USER_CELL)
    kernel_id = as_the_user(lab, "work/sales.ipynb", USER_CELL)
    browser = LabBrowser().start(f"{lab.url}/lab/tree/work/sales.ipynb?token={lab.token}")
    try:
        browser.wait_for("df = pd.DataFrame", timeout=90)  # the notebook is open in JupyterLab
        fake_llm.enqueue(
            run_cell("total = int(df['v'].sum())\nprint('TOTAL', total)"),
            text("The total of v is 6."),
        )
        transcript = tmp_path / "t.ipynb"
        proc = cli(
            lab, fake_llm, "--notebook", "work/sales.ipynb", "--transcript", str(transcript),
            "--format", "json", "--verify", "What is the total of v?",
        )  # fmt: skip
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        first = err.splitlines()[0]
        assert "UNSANDBOXED" in first and "notebook's own kernel" in first and "--approve" in first
        data = json.loads(out)
        assert data["answer"] == "The total of v is 6." and data["isolation"] == "none"
        assert data["cells"][0]["status"] == "ok"
        # the cell shows in JupyterLab with its output
        page = browser.wait_for("TOTAL 6", "total = int(df['v'].sum())", timeout=60)
        shot = browser.screenshot(tmp_path / "jupyterlab.png")
        assert shot.stat().st_size > 10_000
        assert "df = pd.DataFrame" in page  # the user's cell is still there
    finally:
        browser.stop()
    # the model was shown the notebook's cells and the kernel's variables
    asked = fake_llm.requests[0]["messages"][-1]["content"]
    assert "df = pd.DataFrame" in asked and "df (DataFrame" in asked
    # it ran in that notebook's kernel: the same session, the variable is there
    assert lab.session_kernel("work/sales.ipynb") == kernel_id
    cells = document_cells(lab, "work/sales.ipynb")
    assert [c["source"] for c in cells][0] == USER_CELL
    mine = cells[-1]
    assert mine["metadata"]["kernel_agent"]["source"] == "agent"
    assert mine["outputs"][0]["text"] == "TOTAL 6\n" and isinstance(mine["execution_count"], int)
    # the server saved it to the file too
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        saved = nbformat.read(lab.root / "work" / "sales.ipynb", as_version=4)
        if len(saved.cells) == len(cells):
            break
        time.sleep(0.3)
    assert saved.cells[-1].source == mine["source"]
    # the local transcript: valid, the user's cell first, and its clean notebook reproduced
    nb = nbformat.read(transcript, as_version=4)
    nbformat.validate(nb)
    codes = [c.source for c in nb.cells if c.cell_type == "code"]
    assert codes[0] == USER_CELL and codes[-1].startswith("total = ")
    assert data["verify"]["verdict"] == "reproduced"


def test_the_server_going_away_mid_run_is_one_line_and_the_transcript_stays_valid(
    lab, fake_llm, tmp_path
):
    write_notebook(lab.root / "gone.ipynb")
    fake_llm.enqueue(
        run_cell("import time\nprint('started', flush=True)\ntime.sleep(60)"), text("never")
    )
    transcript = tmp_path / "gone-t.ipynb"
    proc = cli(lab, fake_llm, "--notebook", "gone.ipynb", "--transcript", str(transcript), "go")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # until the agent's cell runs in the notebook
        if any(
            "started" in json.dumps(c.get("outputs")) for c in document_cells(lab, "gone.ipynb")
        ):
            break
        time.sleep(0.5)
    lab.kill()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("kernel-agent: ") and "Traceback" not in err
    assert "Jupyter server" in last or "shared document" in last
    nb = nbformat.read(transcript, as_version=4)
    nbformat.validate(nb)
    assert any("time.sleep(60)" in c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize(
    ("args", "token", "code", "words"),
    [
        (["--notebook", "missing.ipynb"], None, 3, "has no notebook 'missing.ipynb'"),
        (["--notebook", "here.ipynb"], "wrong", 3, "refused a wrong token"),
        (["--notebook", "../etc/x.ipynb"], None, 2, "--notebook must be a notebook path"),
        ([], None, 2, "--jupyter-url needs --notebook"),
    ],
)
def test_bad_flags_path_or_token_are_one_line(lab, fake_llm, args, token, code, words):
    write_notebook(lab.root / "here.ipynb")
    proc = cli(lab, fake_llm, *args, "task", token=token)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    lines = [
        line for line in err.strip().splitlines() if not line.startswith("kernel-agent: WARNING")
    ]
    assert len(lines) == 1 and words in lines[0], err
    assert fake_llm.requests == []  # nothing was asked of the model
