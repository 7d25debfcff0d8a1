"""``kernel-agent acp`` as a Jupyter AI persona: driven by ``jupyter-ai-acp-client``'s own
client (``JaiAcpClient``) writing into a real ``jupyterlab_chat`` YChat, with ``--approve``
answered through the chat's permission path, and a follow-up.

The client runs in the lab venv (``make lab-venv``), which holds jupyter-ai-acp-client and
the ``agent-client-protocol`` 0.11 it pins; the agent runs from this checkout (0.12).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from crossing import SRC as CHECKOUT_SRC
from fake_openai import FakeLLM, run_cell, text
from lab_server import lab_python

pytestmark = pytest.mark.timeout(180)
TESTS = Path(__file__).resolve().parents[1]
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid


def test_a_jupyter_ai_persona_answers_a_csv_question_and_a_follow_up(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    work = tmp_path / "lab"
    work.mkdir()
    (work / "sales.csv").write_text("region,amount\nnorth,10\nsouth,32\nnorth,5\n")
    fake_llm.enqueue(
        run_cell("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df['amount'].sum())"),
        text("The total amount is 47."),
        run_cell("print(len(df))"),
        text("There are 3 rows."),
    )
    python = lab_python() / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    env |= {"PYTHONPATH": SRC, "OPENAI_API_KEY": "sk-jai"}
    agent = [sys.executable, "-m", "kernel_agent", "acp", "--approve", "--sandbox", "none",
             "--base-url", fake_llm.base_url, "--model", "test"]  # fmt: skip
    proc = subprocess.run(
        [python, str(TESTS / "jupyter_ai_driver.py"), str(work),
         "What is the total amount in sales.csv?", "How many rows?", "--", *agent],
        capture_output=True, text=True, env=env, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["stops"] == ["end_turn", "end_turn"]
    calls = [c for m in out["messages"] for c in (m["metadata"] or {}).get("tool_calls", [])]
    assert [c["tool_call_id"] for c in calls] == ["cell-1-1", "cell-2-2"]
    for call in calls:  # asked (--approve), allowed through the chat's permission path
        assert call["status"] == "completed" and call["permission_status"] == "resolved"
        assert call["selected_option_id"] == "allow_once" and call["kind"] == "execute"
    assert "read_csv" in calls[0]["raw_input"]["code"] and calls[0]["raw_output"]["output"] == "47"
    assert calls[1]["raw_output"]["output"] == "3"  # the follow-up reused the kernel's df
    bodies = "\n".join(m["body"] for m in out["messages"])
    assert "The total amount is 47." in bodies and "There are 3 rows." in bodies
    assert str(work / "notebooks") in bodies
    fake_llm.assert_drained()
