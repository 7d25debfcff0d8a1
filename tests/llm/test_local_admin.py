"""``kernel-agent local status`` and ``local stop`` on a real kept-alive server (the bundled
model, real processes); run under ``flock /tmp/kernel-agent-model.lock``."""

from __future__ import annotations

import re
import time

import pytest
from test_local_keepalive import alive, real_model  # noqa: F401 (a fixture)

from kernel_agent.frontends.cli import main
from kernel_agent.llm.local_server import LocalModelServer

pytestmark = pytest.mark.timeout(180)


def test_status_shows_the_warm_server_and_stop_ends_it(real_model, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("KERNEL_AGENT_HOME", str(tmp_path))
    server = LocalModelServer(
        real_model, keep_alive=120, state_dir=tmp_path / "servers", log_dir=tmp_path / "logs"
    )
    server.start()
    pid = server.pid
    assert pid is not None
    try:
        server.shutdown()  # the run lets go; the server stays warm for 120 s
        assert alive(pid)
        time.sleep(1.0)
        assert main(["local", "status"]) == 0
        out = capsys.readouterr().out
        assert f"pid {pid}, 127.0.0.1:" in out and real_model.name in out
        left = re.search(r"idle (\d+) s; exits in (\d+) s", out)
        assert left is not None and 1 <= int(left[1]) <= 10 and 110 <= int(left[2]) <= 119, out
        time.sleep(1.0)
        main(["local", "status"])  # asking is not activity: the idle time grows
        again = re.search(r"idle (\d+) s", capsys.readouterr().out)
        assert again is not None and int(again[1]) > int(left[1]) - 1
        assert main(["local", "stop"]) == 0
        assert capsys.readouterr().out.strip() == f"stopped the local model server (pid {pid})"
        assert not alive(pid), "stopped, and no zombie"
        assert not list((tmp_path / "servers").glob("*.json")), "its record is gone"
        main(["local", "status"])
        assert capsys.readouterr().out.strip() == "no local model server is running"
    finally:
        if alive(pid):
            import os
            import signal

            os.kill(pid, signal.SIGKILL)
