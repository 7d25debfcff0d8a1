"""Ctrl-C and SIGTERM mid-run: a valid notebook with every finished cell, no orphan processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import nbformat
import psutil
import pytest
from fake_openai import run_cell

pytestmark = pytest.mark.timeout(120)


def kernels_of(pid: int) -> list[psutil.Process]:
    """The kernel processes started by the agent process ``pid``."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if any("ipykernel_launcher" in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize(
    "sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_signal_mid_cell_keeps_the_notebook_and_leaves_no_orphans(fake_llm, tmp_path, sig, code):
    work = tmp_path / "work"
    work.mkdir()
    nb = tmp_path / "run.ipynb"
    fake_llm.enqueue(
        run_cell("a = 1"), run_cell("print('started', flush=True)\nimport time; time.sleep(60)")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_agent",
            "run",
            "--base-url",
            fake_llm.base_url,
            "--model",
            "m",
            "--api-key",
            "k",
            "--sandbox",
            "none",
            "--cwd",
            str(work),
            "--notebook",
            str(nb),
            "go",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while "started" not in (proc.stderr.readline() or ""):
            assert time.monotonic() < deadline and proc.poll() is None
        kernels = kernels_of(proc.pid)
        assert kernels, "the kernel should be running"
        proc.send_signal(sig)
        assert proc.wait(30) == code
    finally:
        if proc.poll() is None:
            proc.kill()
    cells = nbformat.read(nb, as_version=4)
    nbformat.validate(cells)
    code = [c for c in cells.cells if c.cell_type == "code"]
    assert [c.source for c in code] == [
        "a = 1",
        "print('started', flush=True)\nimport time; time.sleep(60)",
    ]
    # the cell the run ended in keeps its code, marked as such
    assert code[-1].metadata["kernel_agent"]["status"] == "interrupted"
    time.sleep(0.5)
    assert [k for k in kernels if k.is_running() and k.status() != psutil.STATUS_ZOMBIE] == []
