"""Jupyter AI's own ACP client (``jupyter-ai-acp-client``'s ``JaiAcpClient``, writing into a
real ``jupyterlab_chat`` YChat) drives ``kernel-agent acp`` on a notebook open in a real
JupyterLab: a question about a CSV, the cells in the notebook, the answer in the chat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from crossing import SRC as CHECKOUT_SRC
from fake_openai import run_cell, text
from lab_server import LabServer, as_the_user, lab_python, write_notebook

pytestmark = pytest.mark.timeout(240)
TESTS = Path(__file__).resolve().parents[1]
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid


def test_a_jupyter_ai_chat_asks_about_a_csv_and_the_answer_arrives(tmp_path, fake_llm):
    bin_dir = lab_python()
    if subprocess.run([bin_dir / "python", "-c", "import jupyter_ai_acp_client"]).returncode:
        why = "jupyter-ai-acp-client is not in the lab venv: rm -r .venv-lab && make lab-venv"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    lab = LabServer(tmp_path / "lab").start()
    try:
        (lab.root / "sales.csv").write_text("region,amount\nnorth,10\nsouth,25\nnorth,7\n")
        write_notebook(lab.root / "chat.ipynb", "import pandas as pd")
        as_the_user(lab, "chat.ipynb", "import pandas as pd")
        fake_llm.enqueue(
            run_cell("df = pd.read_csv('sales.csv')\nprint(df['amount'].sum())"),
            text("The total amount in sales.csv is 42."),
        )
        argv = [
            sys.executable, "-m", "kernel_agent", "acp", "--jupyter-url", lab.url,
            "--notebook", "chat.ipynb", "--base-url", fake_llm.base_url, "--model", "test",
        ]  # fmt: skip
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "KERNEL_AGENT_", "JUPYTER"))
        }
        env.update(PYTHONPATH=SRC, OPENAI_API_KEY="sk-test", JUPYTER_TOKEN=lab.token)
        spec = {
            "argv": argv,
            "root": str(lab.root),
            "question": "What is the total amount in sales.csv?",
        }
        with open(tmp_path / "driver.log", "w") as log:
            proc = subprocess.run(
                [bin_dir / "python", TESTS / "jai_acp_driver.py", json.dumps(spec)],
                env=env, stdout=subprocess.PIPE, stderr=log, text=True, timeout=120, cwd=tmp_path,
            )  # fmt: skip
        assert proc.returncode == 0, (tmp_path / "driver.log").read_text()[-3000:]
        messages = json.loads(proc.stdout.strip().splitlines()[-1])
        cells = lab.api("GET", "/api/contents/chat.ipynb")["content"]["cells"]
    finally:
        lab.stop()
    chat = "\n".join(m["body"] for m in messages)
    assert "The total amount in sales.csv is 42." in chat, chat
    assert all(m["sender"] == "jupyter-ai-personas::kernel-agent" for m in messages)
    # the cell ran in the notebook's kernel, on the user's pd, and is in the saved notebook
    mine = [c for c in cells if c["metadata"].get("kernel_agent")]
    assert mine and "".join(mine[0]["outputs"][0]["text"]) == "42\n"
