"""``kernel-agent acp`` as a Jupyter AI persona: driven by ``jupyter-ai-acp-client``'s own
client (``JaiAcpClient``) writing into a real ``jupyterlab_chat`` YChat.

jupyter-ai-acp-client pins ``agent-client-protocol<0.12``, so it lives in a directory of
its own (``JAI_SITE``), put first on the driver's path; the agent it spawns then runs
on that SDK too (kernel-agent supports 0.11 and 0.12). Make it with::

    .venv/bin/pip install --no-deps --target .jai-site agent-client-protocol==0.11.1 \\
        jupyter-ai-acp-client==0.3.3 jupyter-ai-persona-manager==0.3.0 \\
        jupyter-ai-router==0.1.1 jupyterlab-chat==0.25.3 lazy-importer==0.1.0 \\
        importlib-metadata==10.2.0 zipp==4.1.2
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import FakeLLM, run_cell, text

pytestmark = pytest.mark.timeout(180)
TESTS = Path(__file__).resolve().parents[1]
SRC = str(TESTS.parent / "src")
SITE = Path(os.environ.get("JAI_SITE") or TESTS.parent / ".jai-site")


@pytest.mark.skipif(
    not (SITE / "jupyter_ai_acp_client").is_dir(),
    reason=f"jupyter-ai-acp-client is not installed in {SITE} (set JAI_SITE; see this module)",
)
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    env |= {"PYTHONPATH": os.pathsep.join([str(SITE), SRC]), "OPENAI_API_KEY": "sk-jai"}
    proc = subprocess.run(
        [sys.executable, str(TESTS / "jupyter_ai_driver.py"), str(work), fake_llm.base_url,
         "What is the total amount in sales.csv?", "How many rows?"],
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
