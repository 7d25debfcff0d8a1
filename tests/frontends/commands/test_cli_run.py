"""``kernel-agent run`` end to end: the real console script against the scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest
from fake_openai import error, model_not_found, run_cell, text

pytestmark = pytest.mark.timeout(120)


def cli(args, *, env_extra=None, stdin=None, cwd=None, timeout=90):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def remote(fake, tmp_path):
    return [
        "--base-url",
        fake.base_url,
        "--model",
        "test",
        "--api-key",
        "sk-test",
        "--sandbox",
        "none",
        "--cwd",
        str(tmp_path),
    ]


def test_json_output_has_answer_status_notebook_cells_usage(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("import math\nprint(math.factorial(15))"), text("15! is 1307674368000")
    )
    nb = tmp_path / "out.ipynb"
    proc = cli(
        [
            "run",
            "--format",
            "json",
            "--notebook",
            str(nb),
            *remote(fake_llm, tmp_path),
            "What is 15!?",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["answer"] == "15! is 1307674368000" and data["status"] == "ok"
    assert data["notebook"] == str(nb) and data["usage"]["total_tokens"] > 0
    assert data["cells"][0]["status"] == "ok"
    nbformat.validate(nbformat.read(nb, as_version=4))


def test_task_from_stdin_and_bare_shortcut(fake_llm, tmp_path):
    fake_llm.enqueue(run_cell("print('hi')"), text("said hi"), run_cell("print(1)"), text("one"))
    proc = cli(
        ["run", "--format", "plain", *remote(fake_llm, tmp_path), "-"],
        stdin="say hi\n",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "said hi"
    assert fake_llm.requests[0]["messages"][1]["content"].startswith("say hi")
    bare = cli([*remote(fake_llm, tmp_path), "--format", "plain", "print one"], cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.strip() == "one"


def test_markdown_output_and_live_progress_on_stderr(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell(
            "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]); plt.show()\nprint('plotted')"
        ),
        text("**Done**"),
    )
    nb = tmp_path / "plot.ipynb"
    proc = cli(["run", "--notebook", str(nb), *remote(fake_llm, tmp_path), "plot"])
    assert proc.returncode == 0, proc.stderr
    assert "Done" in proc.stdout and "plotted" not in proc.stdout
    assert "plotted" in proc.stderr and "image saved:" in proc.stderr
    images = list((tmp_path / "plot_files").glob("*.png"))
    assert len(images) == 1 and images[0].read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "args, reply, message",
    [
        (["--model", "openai:gpt-4o-mini"], None, "no API key"),
        (["--base-url", "http://127.0.0.1:9/v1", "--model", "m"], None, "cannot reach"),
        (
            "fake",
            error(401, "Incorrect API key", type="invalid_request_error", code="invalid_api_key"),
            "rejected the API key",
        ),
        ("fake", model_not_found("test"), "test"),
    ],
    ids=["missing-key", "unreachable", "401", "unknown-model"],
)
def test_endpoint_problems_are_one_line_errors(fake_llm, tmp_path, args, reply, message):
    if args == "fake":
        for _ in range(4):
            fake_llm.enqueue(reply)
        args = ["--base-url", fake_llm.base_url, "--model", "test", "--api-key", "sk-x"]
    proc = cli(
        [
            "run",
            "--sandbox",
            "none",
            "--cwd",
            str(tmp_path),
            "--notebook",
            str(tmp_path / "e.ipynb"),
            *args,
            "task",
        ]
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("kernel-agent: error:") and message in lines[-1], proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_task_and_unwritable_notebook(tmp_path):
    empty = cli(["run", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "   "])
    assert empty.returncode == 2 and "task is empty" in empty.stderr
    a_file = tmp_path / "plain.txt"
    a_file.write_text("not a folder")
    bad = cli(
        [
            "run",
            "--notebook",
            str(a_file / "x.ipynb"),
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "t",
        ]
    )
    assert bad.returncode == 2 and "cannot write the notebook" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_notebook_path_that_is_a_directory(tmp_path):
    proc = cli(
        [
            "run",
            "--notebook",
            str(tmp_path),
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "t",
        ]
    )
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def test_interactive_chat_keeps_the_kernel(fake_llm, tmp_path):
    fake_llm.enqueue(run_cell("n = 21"), text("set n"), run_cell("print(n * 2)"), text("42"))
    proc = cli(
        ["run", "--interactive", "--format", "plain", *remote(fake_llm, tmp_path)],
        stdin="set n to 21\ndouble n\n/exit\n",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["set n", "42"]
    assert "42" in proc.stderr  # the cell's live output


def test_approve_flag_asks_before_each_cell(fake_llm, tmp_path):
    fake_llm.enqueue(run_cell("print('first')"), run_cell("print('second')"), text("done"))
    nb = tmp_path / "approved.ipynb"
    proc = cli(
        [
            "run",
            "--approve",
            "--format",
            "plain",
            "--notebook",
            str(nb),
            *remote(fake_llm, tmp_path),
            "two cells",
        ],
        stdin="r\ns\n",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[r]un, [s]kip, [e]dit, [q]uit" in proc.stdout + proc.stderr
    cells = [c for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code"]
    assert [c.metadata["kernel_agent"]["status"] for c in cells] == ["ok", "skipped"]
    assert cells[0].outputs[0]["text"] == "first\n" and cells[1].outputs == []


def test_approve_edit_replaces_the_cell(fake_llm, tmp_path):
    fake_llm.enqueue(run_cell("print('original')"), text("done"))
    nb = tmp_path / "edited.ipynb"
    proc = cli(
        [
            "run",
            "--approve",
            "--format",
            "plain",
            "--notebook",
            str(nb),
            *remote(fake_llm, tmp_path),
            "edit it",
        ],
        stdin="e\nprint('edited')\n.\n",
        cwd=tmp_path,
        env_extra={"EDITOR": "", "VISUAL": ""},
    )
    assert proc.returncode == 0, proc.stderr
    cells = [c for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code"]
    assert [c.source for c in cells] == ["print('edited')"]
    assert cells[0].outputs[0]["text"] == "edited\n"
