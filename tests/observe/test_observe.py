"""``kernel-agent observe``: real runs (scripted model, real kernel) in a directory, the real
command serving them with uvicorn on 127.0.0.1, and the pages rendered in headless Chromium."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import nbformat
import pytest
from crossing import SRC
from fake_openai import FakeLLM, run_cell, text
from nbfactory import require_chromium
from serve_server import free_port

from kernel_agent.agent import Agent
from kernel_agent.notebook.chromium import CHROMIUM_FLAGS, find_chromium
from kernel_agent.observe import list_runs, timeline
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(300)

TASK = "Sum the squares of 1 to 4 and plot them"


def make_runs(directory: Path, work: Path) -> tuple[Path, Path]:
    """Two real runs: one that verified (with a failed attempt and a plot), one a budget stopped."""
    with FakeLLM() as fake:
        fake.enqueue(
            run_cell("squares = [n * n for n in range(1, 5)]"),
            run_cell("print(sum(square))"),
            run_cell("print(sum(squares))"),
            run_cell(
                "import matplotlib.pyplot as plt\n"
                "plt.bar(range(1, 5), squares, color='#ff00ff'); plt.show()"
            ),
            text("The sum of the squares is 30."),
        )
        settings = Settings.from_env(
            env={}, base_url=fake.base_url, model="test-model", api_key="sk-test",
            notebook_dir=directory, cwd=work, sandbox="none", verify=True,
        )  # fmt: skip
        with Agent(settings) as agent:
            ok = agent.run_to_end(TASK)
        stop_after_one = [
            dataclasses.replace(run_cell(f"print({i})"), usage=(100, 20)) for i in (1, 2)
        ]
        fake.enqueue(*stop_after_one)
        with Agent(settings.with_(verify=False, max_total_tokens=200)) as agent:
            budget = agent.run_to_end("Count slowly")
    assert ok.status == "ok" and budget.status == "budget"
    assert ok.notebook is not None and budget.notebook is not None
    return ok.notebook, budget.notebook


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    directory = tmp_path_factory.mktemp("notebooks")
    ok, budget = make_runs(directory, tmp_path_factory.mktemp("work"))
    return directory, ok, budget


@pytest.fixture(scope="module")
def observe(runs: tuple[Path, Path, Path]) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "observe", str(runs[0]), "--port", str(port)],
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "observe did not start"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def chromium(url: str, *action: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               "--virtual-time-budget=5000", *action, url]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


def test_listing_and_timeline_read_from_the_notebooks(runs: tuple[Path, Path, Path]) -> None:
    directory, ok, budget = runs
    listed = list_runs(directory)
    assert [r.name for r in listed] == [budget.name, ok.name]  # newest first
    first = listed[1]
    assert first.task == TASK and first.status == "ok" and first.cells == 4
    assert first.verify == "reproduced" and first.clean is not None
    assert first.total_tokens and first.total_tokens > 0 and first.model.endswith("test-model")
    assert listed[0].status == "budget" and listed[0].budget["stopped_by"] == "max_total_tokens"
    nb = nbformat.read(ok, as_version=4)
    bars = timeline(nb)
    kinds = [(b.row, b.kind, b.status) for b in bars]
    assert kinds[:8] == [
        ("step 1", "model", ""), ("step 1", "kernel", "ok"),
        ("step 2", "model", ""), ("step 2", "kernel", "error"),
        ("step 3", "model", ""), ("step 3", "kernel", "ok"),
        ("step 4", "model", ""), ("step 4", "kernel", "ok"),
    ]  # fmt: skip
    assert kinds[-1] == ("answer", "model", "")
    # a waterfall: each bar starts where the one before it ended
    for before, after in zip(bars, bars[1:], strict=False):
        assert after.start == pytest.approx(before.start + before.seconds)
    meta = nb.metadata["kernel_agent"]
    model = sum(b.seconds for b in bars if b.kind == "model")
    assert model == pytest.approx(meta["model_time_s"], abs=0.002)


def test_the_server_is_read_only_and_loopback_only(
    observe: str, runs: tuple[Path, Path, Path]
) -> None:
    _, ok, _ = runs
    with httpx.Client(base_url=observe, timeout=60) as http:
        page = http.get("/")
        assert page.status_code == 200 and TASK in page.text and "reproduced" in page.text
        assert "script-src" not in page.headers["content-security-policy"]
        assert http.post("/").status_code == 405
        assert http.delete(f"/runs/{ok.name}").status_code == 405
        assert http.get("/runs/..%2F..%2Fetc%2Fpasswd").status_code == 404
        assert http.get("/runs/missing.ipynb").status_code == 404
        assert http.get("/", headers={"host": "evil.example:80"}).status_code == 421
        clean = http.get(f"/runs/{ok.name}/ipynb", params={"clean": 1})
        nb = nbformat.reads(clean.text, as_version=4)
        assert [c.source for c in nb.cells if c.cell_type == "code"] == [
            "squares = [n * n for n in range(1, 5)]",
            "print(sum(squares))",
            "import matplotlib.pyplot as plt\n"
            "plt.bar(range(1, 5), squares, color='#ff00ff'); plt.show()",
        ]
        rendered = http.get(f"/runs/{ok.name}/html")
        assert "sandbox" in rendered.headers["content-security-policy"]
        assert "NameError" in rendered.text and "image/png" in rendered.text


def test_pages_in_chromium(observe: str, runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    require_chromium()
    _, ok, budget = runs
    listing = chromium(f"{observe}/", "--dump-dom")
    assert TASK in listing and "Count slowly" in listing
    assert f"/runs/{ok.name}" in listing and ">budget<" in listing and ">reproduced<" in listing
    page = chromium(f"{observe}/runs/{ok.name}", "--dump-dom")
    assert 'class="bar model' in page and 'class="bar kernel error' in page
    assert f"/runs/{ok.name}/html" in page and f"/runs/{ok.name}?clean=1" in page
    assert "counted" not in page and "tokens (" in page  # the scripted server reports usage
    frame = chromium(f"{observe}/runs/{ok.name}/html", "--dump-dom")
    assert "The sum of the squares is 30." in frame and "provenance" in frame
    shot = tmp_path / "observe-run.png"
    chromium(f"{observe}/runs/{ok.name}", f"--screenshot={shot}", "--window-size=1400,900")
    assert shot.is_file() and shot.stat().st_size > 20_000
    listing_shot = tmp_path / "observe-list.png"
    chromium(f"{observe}/", f"--screenshot={listing_shot}", "--window-size=1400,500")
    assert listing_shot.is_file()
    keep = os.environ.get("KERNEL_AGENT_KEEP_SCREENSHOTS")
    if keep:  # to look at them: KERNEL_AGENT_KEEP_SCREENSHOTS=DIR
        for path in (shot, listing_shot):
            Path(keep, path.name).write_bytes(path.read_bytes())
    del budget
