"""``kernel-agent acp`` as a command: its flags, its errors, and a clean wire on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from crossing import SRC as CHECKOUT_SRC

pytestmark = pytest.mark.timeout(60)
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    return {**clean, "PYTHONPATH": path}


def test_help_names_the_protocol_and_approve() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "acp", "--help"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert proc.returncode == 0
    assert "Agent Client Protocol" in proc.stdout and "--approve" in proc.stdout


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--max-steps", "0"], "max steps"),
        (["--cell-timeout", "-1"], "cell timeout"),
        (["--notebook", "a.ipynb"], "--notebook needs --jupyter-url"),
    ],
)
def test_bad_settings_are_one_line_errors_before_any_protocol(
    flags: list[str], message: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "acp", *flags],
        input="",
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernel-agent: error:") and message in lines[0]


def test_stdout_carries_only_json_rpc_and_eof_ends_the_agent(tmp_path: Path) -> None:
    """Raw wire: one initialize line in, one JSON-RPC line out; stdin closed -> exit 0."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "acp", "--base-url", "http://127.0.0.1:9/v1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=tmp_path,
    )
    try:
        out, err = proc.communicate(json.dumps(request).encode() + b"\n", timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode(errors="replace")
    lines = out.decode().splitlines()
    assert len(lines) == 1
    reply = json.loads(lines[0])
    assert reply["id"] == 1 and reply["result"]["agentInfo"]["name"] == "kernel-agent"
    assert reply["result"]["protocolVersion"] == 1
