"""The web page of ``kernel-agent serve`` in headless Chromium: the session list, and a
session page with its live notebook and the events of its latest run."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import httpx2 as httpx
import pytest
from fake_openai import FakeLLM, run_cell, text
from nbfactory import require_chromium
from serve_server import TOKEN, serve

from kernel_agent.notebook.chromium import CHROMIUM_FLAGS, find_chromium

pytestmark = pytest.mark.timeout(240)


def chromium(url: str, *action: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=8000",
               *action, url]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


def test_pages_in_chromium(tmp_path: Path) -> None:
    require_chromium()
    with FakeLLM() as llm, serve(tmp_path / "state", "--model", "gpt-fake", "--base-url", llm.base_url,
                                 "--protocol", "tools") as srv:  # fmt: skip
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=srv.url, headers=auth, timeout=120) as http:
            sid = http.post("/v1/sessions", json={}).json()["id"]
            http.post(
                f"/v1/sessions/{sid}/execute",
                json={"code": "greeting = 'hello from the kernel'\nprint(greeting)"},
            )
            llm.enqueue(run_cell("print(len(greeting))"), text("The greeting has 21 characters."))
            assert (
                "RunFinished"
                in http.post(f"/v1/sessions/{sid}/runs", json={"task": "count it"}).text
            )
        # without a token: the login form, not the sessions
        assert "<form" in chromium(f"{srv.url}/", "--dump-dom") and sid not in chromium(
            f"{srv.url}/", "--dump-dom"
        )
        listing = chromium(f"{srv.url}/?token={TOKEN}", "--dump-dom")
        assert f"/sessions/{sid}" in listing and "live" in listing
        dom = chromium(f"{srv.url}/sessions/{sid}?token={TOKEN}", "--dump-dom")
        assert "The greeting has 21 characters." in dom  # the latest run's events, streamed in
        assert (
            f"/sessions/{sid}/view?cells=2" in dom
        )  # the frame follows the cells: one executed, one from the run
        assert "2 cells" in dom
        shot = tmp_path / "session.png"
        chromium(
            f"{srv.url}/sessions/{sid}?token={TOKEN}",
            f"--screenshot={shot}",
            "--window-size=1400,900",
        )
        assert shot.is_file() and shot.stat().st_size > 10_000
