"""``kernel-agent local stop`` never signals, and ``local status`` never sends the token to,
a process that a state record names but that is not our running server: a recycled pid
of ours named like the daemon, and another user's process posing as it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_agent.frontends.cli import main

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
    pytest.mark.skipif(os.geteuid() != 0, reason="plays another user: needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv"),
]

# another user listening on a loopback port, its argv naming our daemon module
SQUATTER = r"""
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
s.settimeout(8)
try:
    while True:
        c, _ = s.accept()
        sys.stderr.write("GOT " + c.recv(65536).decode(errors="replace") + "\n")
        sys.stderr.flush()
        c.close()
except socket.timeout:
    pass
"""
DECOY = "import time; time.sleep(30)"


def _record(home: Path, name: str, pid: int, port: int) -> Path:
    servers = home / "servers"
    servers.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = servers / f"{name}.json"
    path.write_text(json.dumps({"pid": pid, "port": port, "token": "SECRET", "model": "/m.gguf"}))
    return path


def test_status_and_stop_leave_alone_what_is_not_our_server(tmp_path, monkeypatch, capsys):
    squatter = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         SQUATTER, "kernel_agent.llm.local_daemon"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
    )  # fmt: skip
    decoy = subprocess.Popen([sys.executable, "-c", DECOY, "kernel_agent.llm.local_daemon"])
    try:
        assert squatter.stdout is not None
        port = int(squatter.stdout.readline())
        monkeypatch.setenv("KERNEL_AGENT_HOME", str(tmp_path))
        theirs = _record(tmp_path, "a" * 16, squatter.pid, port)  # another user's pid
        recycled = _record(tmp_path, "b" * 16, decoy.pid, port)  # ours, but not listening
        assert main(["local", "status"]) == 0
        out = capsys.readouterr().out
        assert out.count("stale record") == 2 and "no local model server is running" in out
        assert main(["local", "stop"]) == 0
        out = capsys.readouterr().out
        assert out.count("removed a stale record") == 2
        assert not theirs.exists() and not recycled.exists()
        time.sleep(0.2)
        assert squatter.poll() is None and decoy.poll() is None, "nothing was signalled"
    finally:
        decoy.kill()
        decoy.wait()
        squatter.kill()
        _, err = squatter.communicate(timeout=10)
    assert "GOT" not in err and "SECRET" not in err, err


def test_stop_with_no_server_and_a_bad_state_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNEL_AGENT_HOME", str(tmp_path))
    assert main(["local", "stop"]) == 0
    assert capsys.readouterr().out.strip() == "no local model server is running"
    assert not (tmp_path / "servers").exists(), "status and stop create nothing"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "servers").symlink_to(tmp_path / "elsewhere")
    assert main(["local", "status"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("kernel-agent: error:") and "not a directory of ours" in err
