"""``set_result(data, files=[...])``: a declared result and its files, checked and delivered.

A real sandboxed kernel and the scripted server; the CLI test runs the console script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.errors import ToolError
from kernel_agent.events import Notice, RunFinished
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.settings import Settings
from kernel_agent.tools.declared import DeclaredResult, ResultLimits

pytestmark = pytest.mark.timeout(120)

SANDBOX = "none" if bwrap_problem()[0] else "bwrap"


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(fake, tmp_path, **(dict(sandbox=SANDBOX, levers="none") | kw))


def run(fake: FakeLLM, tmp_path: Path, **kw):
    with Agent(settings_for(fake, tmp_path, **kw)) as agent:
        events = list(agent.run("make a result"))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result, events


def test_result_and_files_reach_the_run_result_and_the_notebook(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell(
            "import os\nos.makedirs('out', exist_ok=True)\n"
            "open('out/table.csv', 'w').write('n,sq\\n1,1\\n2,4\\n')\n"
            "open('notes.txt', 'w').write('hello')\n"
            "set_result({'total': 5, 'rows': [1, 4]}, files=['out/table.csv', 'notes.txt'])"
        ),
        text("done"),
    )
    result, events = run(fake_llm, tmp_path)
    assert result.status == "ok", result.answer
    assert result.result == {"total": 5, "rows": [1, 4]}
    names = sorted(p.relative_to(result.notebook.parent).as_posix() for p in result.files)
    stem = result.notebook.stem
    assert names == [f"{stem}_files/result/table.csv"]  # flat; notes.txt is not a data file
    assert (result.notebook.parent / names[0]).read_text() == "n,sq\n1,1\n2,4\n"
    said = [e.text for e in events if isinstance(e, Notice)]
    assert any("1 declared file(s) are not plain data files and stay only in work.zip: "
               "notes.txt" in t for t in said), said  # fmt: skip
    with zipfile.ZipFile(result.notebook.parent / f"{stem}_files" / "work.zip") as zf:
        assert sorted(zf.namelist()) == ["notes.txt", "out/table.csv"]  # and in the archive
    assert result.cells[0].outputs == []  # set_result returns None
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"]["result"] == {
        "data": {"total": 5, "rows": [1, 4]},
        "files": ["out/table.csv", "notes.txt"],
    }
    calls = nb.cells[1].metadata["kernel_agent"]["tool_calls"]
    assert calls[0]["tool"] == "set_result" and calls[0]["ok"]
    assert result.as_dict()["result"] == {"total": 5, "rows": [1, 4]}


def test_escaping_missing_and_oversized_paths_are_refused(fake_llm, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    fake_llm.enqueue(
        run_cell(
            "import os\nos.symlink('/etc/passwd', 'link')\n"
            "open('ok.txt', 'w').write('x')\n"
            "for files in (['../outside.txt'], ['/etc/passwd'], ['link'], ['missing.txt'],\n"
            "              ['ok.txt'] * 3, ['.'], [os.getcwd() + '/ok.txt']):\n"
            "    try:\n"
            "        set_result(1, files=files)\n"
            "        print('accepted', files)\n"
            "    except ToolError as e:\n"
            "        print(e)\n"
            "try:\n"
            "    set_result({1, 2})\n"
            "except ToolError as e:\n"
            "    print(e)"
        ),
        text("done"),
    )
    with Agent(settings_for(fake_llm, tmp_path)) as agent:
        agent.aio.host.result.limits = ResultLimits(max_files=2)
        events = list(agent.run("try bad paths"))
    result = events[-1].result
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert "paths with '..' are not allowed" in lines[0]
    assert "absolute paths are not allowed" in lines[1]
    assert "'link'" in lines[2] and "symlink" in lines[2]
    assert lines[3] == "set_result: no file 'missing.txt' in the work dir"
    assert lines[4] == "set_result: at most 2 files, got 3"
    assert "not a file name" in lines[5]
    assert "absolute paths are not allowed" in lines[6]
    assert "not JSON-serialisable" in lines[7]
    assert result.result is None  # nothing was ever accepted


def test_declared_result_bounds_a_file_size(tmp_path):
    (tmp_path / "big.bin").write_bytes(b"x" * 2000)
    declared = DeclaredResult(ResultLimits(max_file_bytes=1000, max_data_bytes=10))
    with pytest.raises(ToolError, match="over the 1000 byte bound"):
        declared.declare(None, ["big.bin"], tmp_path)
    with pytest.raises(ToolError, match="over the 10 byte bound"):
        declared.declare("x" * 20, [], tmp_path)
    assert not declared.declared


def test_a_run_asked_for_a_result_is_told_once(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("x = 41 + 1\nprint(x)"),
        text("It is 42."),  # no set_result: told once
        run_cell("set_result({'x': x})"),
        text("It is 42."),
    )
    result, events = run(fake_llm, tmp_path, ask_result=True, verify=True)
    assert result.status == "ok" and result.result == {"x": 42}
    assert result.verify["verdict"] == "reproduced", str(result.verify)  # set_result re-runs
    assert "call `set_result(...)`" in fake_llm.requests[0]["messages"][0]["content"]
    told = [m for r in fake_llm.requests for m in r["messages"] if "no result is set" in str(m)]
    assert told and any(isinstance(e, Notice) and "set_result" in e.text for e in events)

    fake_llm.enqueue(text("It is 42."), text("Still 42."))
    (tmp_path / "again").mkdir()
    result, _ = run(fake_llm, tmp_path / "again", ask_result=True)
    assert result.answer == "Still 42." and result.result is None  # told once, not twice


def test_format_json_prints_result_and_files(fake_llm, tmp_path):
    fake_llm.enqueue(
        run_cell("open('a.csv', 'w').write('A')\nset_result([1, 2, 3], files=['a.csv'])"),
        text("done"),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    nb = tmp_path / "run.ipynb"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernel_agent",
            "run",
            "--format",
            "json",
            "--result",
            "--notebook",
            str(nb),
            "--base-url",
            fake_llm.base_url,
            "--model",
            "test",
            "--sandbox",
            SANDBOX,
            "--cwd",
            str(tmp_path),
            "make it",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={**env, "OPENAI_API_KEY": "sk-test", "KERNEL_AGENT_LEVERS": "none"},
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["result"] == [1, 2, 3]
    assert out["files"] == [str(tmp_path / "run_files" / "result" / "a.csv")]
    assert (tmp_path / "run_files" / "result" / "a.csv").read_text() == "A"
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert "call `set_result(...)`" in system
