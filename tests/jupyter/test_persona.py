"""The kernel-agent persona through Jupyter AI's own persona manager, in a real JupyterLab.

The lab venv has jupyter-ai 3 and kernel-agent installed (``make lab-venv``), so the
persona manager finds ``KernelAgentPersona`` by its entry point. A chat message
``@kernel-agent`` with a CSV question goes through the persona manager's own entry
(``/api/ai/message/kernel-agent``: ``BasePersona.on_message``, the path a live chat takes:
``prepare()`` starts ``kernel-agent acp``, ``process_message()`` prompts it); the agent's
cell appears in the notebook the user has open and runs in its kernel, on the user's
variable, and the answer is the chat's reply. Then headless Chromium shows the notebook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from crossing import SRC as CHECKOUT_SRC
from fake_openai import run_cell, text
from lab_server import LabBrowser, LabServer, as_the_user, lab_python, write_notebook

pytestmark = pytest.mark.timeout(300)
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid
NOTES = Path("/work/notes")

USER_CELL = "import pandas as pd\nthreshold = 8"
QUESTION = "@kernel-agent Which amounts in sales.csv are above my threshold? Give the total."
CODE = "df = pd.read_csv('sales.csv')\nbig = df[df['amount'] > threshold]\nprint('ABOVE', *big['amount'], 'TOTAL', big['amount'].sum())"  # noqa: E501
ANSWER = "The amounts above your threshold (8) are 10 and 25: 35 in total."


def _needs_jupyter_ai() -> None:
    bin_dir = lab_python()
    if subprocess.run([bin_dir / "python", "-c", "import jupyter_ai, kernel_agent"]).returncode:
        why = "jupyter-ai or kernel-agent is not in the lab venv: rm -r .venv-lab && make lab-venv"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def _lab(tmp_path: Path, fake_llm, **env: str) -> LabServer:
    _needs_jupyter_ai()
    base = {
        "PYTHONPATH": SRC,  # this checkout's kernel-agent, for the agent process too
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": fake_llm.base_url,
        "KERNEL_AGENT_MODEL": "test",
        "KERNEL_AGENT_HOME": str(tmp_path / "home"),
    }
    return LabServer(tmp_path / "lab", env={**base, **env}).start(timeout=120)


def ask(lab: LabServer, persona: str, message: str, timeout: float = 150) -> str:
    """A chat message to ``persona`` through the persona manager; the chat's text back."""
    request = urllib.request.Request(
        f"{lab.url}/api/ai/message/{persona}",
        data=json.dumps({"message": message}).encode(),
        method="POST",
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return str(json.loads(resp.read())["response"])


def _agent_process(lab: LabServer) -> tuple[list[str], list[str]]:
    """The argv and environment of the ``kernel-agent acp`` the persona started."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            if "acp" in argv and "--jupyter-url" in argv and lab.url in " ".join(argv):
                env = (proc / "environ").read_bytes().decode(errors="replace").split("\0")
                return argv, env
        except OSError:
            continue
    raise AssertionError("no kernel-agent acp process")


def _agent_cells(lab: LabServer, path: str, timeout: float = 20) -> list[dict]:
    """The agent's cells in the saved notebook (the document is saved a moment after, and
    a read while the collaboration server writes it is refused with 400, "Unreadable
    Notebook": CI's persona run, 2026-12-07, with an eval beside it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cells = lab.api("GET", f"/api/contents/{path}")["content"]["cells"]
        except urllib.error.HTTPError as error:
            if error.code != 400 or time.monotonic() > deadline:
                raise AssertionError(f"{path}: {error}\n{lab.log_tail()}") from error
            time.sleep(0.3)
            continue
        mine = [c for c in cells if c["metadata"].get("kernel_agent")]
        if (mine and mine[-1]["outputs"]) or time.monotonic() > deadline:
            return mine
        time.sleep(0.3)


def test_the_persona_manager_routes_a_csv_question_to_the_open_notebook(tmp_path, fake_llm):
    lab = _lab(tmp_path, fake_llm)
    try:
        (lab.root / "sales.csv").write_text("region,amount\nnorth,10\nsouth,25\nnorth,7\n")
        write_notebook(lab.root / "sales.ipynb", USER_CELL)
        as_the_user(lab, "sales.ipynb", USER_CELL)  # open, with `threshold` in its kernel
        fake_llm.enqueue(run_cell(CODE), text(ANSWER))

        reply = ask(lab, "kernel-agent", QUESTION)

        assert ANSWER in reply, reply
        mine = _agent_cells(lab, "sales.ipynb")
        assert len(mine) == 1 and mine[0]["source"].endswith(CODE)
        # it ran in the notebook's own kernel: `threshold` is the user's
        assert "".join(mine[0]["outputs"][0]["text"]) == "ABOVE 10 25 TOTAL 35\n"
        assert mine[0]["execution_count"] is not None
        # the model was asked with the notebook's cells and variables
        first = json.dumps(fake_llm.requests[0]["messages"])
        assert "threshold" in first and "Which amounts" in first
        # the agent runs with the server's own URL; the token is in its env, not its argv
        argv, environ = _agent_process(lab)
        assert argv[argv.index("--jupyter-url") + 1].rstrip("/") == lab.url
        assert not any(lab.token in a for a in argv)
        assert f"JUPYTER_TOKEN={lab.token}" in environ
        assert lab.token not in (lab.workdir / "lab.log").read_text(errors="replace")

    finally:
        lab.stop()


def _side_by_side(lab: LabServer, notebook: str, chat: str) -> None:
    """JupyterLab's workspace: the notebook on the left, the chat on the right."""
    layout = {
        "main": {
            "dock": {
                "type": "split-area",
                "orientation": "horizontal",
                "sizes": [0.55, 0.45],
                "children": [
                    {"type": "tab-area", "currentIndex": 0, "widgets": [f"notebook:{notebook}"]},
                    {"type": "tab-area", "currentIndex": 0, "widgets": [f"chat:{chat}"]},
                ],
            },
            "current": f"chat:{chat}",
        },
        "left": {"collapsed": True, "visible": True, "widgets": ["filebrowser"]},
    }
    data = {
        "layout-restorer:data": layout,
        f"notebook:{notebook}": {"data": {"path": notebook, "factory": "Notebook"}},
        f"chat:{chat}": {"data": {"filepath": chat, "inSidePanel": False}},
    }
    lab.api("PUT", "/lab/api/workspaces/default", {"data": data, "metadata": {"id": "default"}})


def _type_and_send(browser: LabBrowser, message: str) -> None:
    """What the user does: click into the chat's input, type, press Enter."""
    deadline = time.monotonic() + 60
    focused = False
    while not focused and time.monotonic() < deadline:
        found = browser.call(
            "Runtime.evaluate",
            {
                "expression": "(() => { const t = document.querySelector("
                "'textarea[placeholder^=\"Type a chat message\"]'); "
                "if (t) t.focus(); return !!t; })()",
                "returnByValue": True,
            },
        )
        focused = bool(found.get("result", {}).get("value"))
        if not focused:
            time.sleep(0.5)
    assert focused, "the chat's input never showed"
    browser.call("Input.insertText", {"text": message})
    time.sleep(1)  # the mention pop-up settles
    for kind in ("keyDown", "keyUp"):
        key = {"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
        if kind == "keyDown":
            key["text"] = "\r"
        browser.call("Input.dispatchKeyEvent", key)


def test_in_jupyterlab_a_user_asks_in_the_chat_and_watches_the_notebook(tmp_path, fake_llm):
    """The issue's "done when": JupyterLab in a browser, the notebook and its chat side by
    side; the user types ``@kernel-agent`` and a CSV question into the chat; the cell
    appears in the notebook and runs in its kernel; the answer arrives in the chat."""
    lab = _lab(tmp_path, fake_llm)
    browser = None
    try:
        (lab.root / "sales.csv").write_text("region,amount\nnorth,10\nsouth,25\nnorth,7\n")
        write_notebook(lab.root / "sales.ipynb", USER_CELL)
        as_the_user(lab, "sales.ipynb", USER_CELL)
        # a chat beside the notebook, with its name: the persona works in sales.ipynb
        lab.api(
            "PUT", "/api/contents/sales.chat", {"type": "file", "format": "text", "content": "{}"}
        )
        _side_by_side(lab, "sales.ipynb", "sales.chat")
        fake_llm.enqueue(run_cell(CODE), text(ANSWER))

        browser = LabBrowser().start(f"{lab.url}/lab?token={lab.token}")
        browser.wait_for("threshold = 8", timeout=90)
        _type_and_send(browser, QUESTION)
        seen = browser.wait_for(
            ANSWER, "ABOVE 10 25 TOTAL 35", "Run cell 1 in sales.ipynb", timeout=120
        )
        shot = browser.screenshot(tmp_path / "persona.png")
        if NOTES.is_dir():
            shutil.copy(shot, NOTES / "persona.png")
        mine = _agent_cells(lab, "sales.ipynb")
    finally:
        if browser is not None:
            browser.stop()
        lab.stop()
    assert "Which amounts in sales.csv" in seen  # the user's message, in the chat
    assert len(mine) == 1 and mine[0]["source"].endswith(CODE)
    assert "".join(mine[0]["outputs"][0]["text"]) == "ABOVE 10 25 TOTAL 35\n"


def test_a_persona_whose_agent_cannot_start_says_so_in_one_line(tmp_path, fake_llm):
    lab = _lab(tmp_path, fake_llm, KERNEL_AGENT_COMMAND=str(tmp_path / "no-such-kernel-agent"))
    try:
        write_notebook(lab.root / "sales.ipynb", "x = 1")
        lab.open_session("sales.ipynb")
        reply = ask(lab, "kernel-agent", "@kernel-agent hello", timeout=60)
    finally:
        lab.stop()
    assert reply.startswith("kernel-agent could not answer:"), reply
    assert "\n" not in reply.strip() and "no-such-kernel-agent" in reply
    assert "Traceback" not in reply


def test_without_an_open_notebook_the_persona_asks_which(tmp_path, fake_llm):
    lab = _lab(tmp_path, fake_llm)
    try:
        write_notebook(lab.root / "a.ipynb", "x = 1")
        write_notebook(lab.root / "b.ipynb", "y = 2")
        lab.open_session("a.ipynb")
        lab.open_session("b.ipynb")  # two open: the persona does not guess
        reply = ask(lab, "kernel-agent", "@kernel-agent sum x and y", timeout=60)
    finally:
        lab.stop()
    assert reply.strip() == (
        "kernel-agent: which notebook? Open one notebook, or attach it to your message, "
        "and ask again."
    )
    assert not fake_llm.requests
