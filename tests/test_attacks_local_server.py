"""Attacks on the kept-warm local model server from another local user.

The server outlives a run (keep-alive), so it is a standing service on 127.0.0.1:
another user on the machine could try to use it, or to pose as it and collect the
token a run sends. Each test plays that user for real (a process run as ``nobody``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernel_agent.llm.local_server import LocalModelServer

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="plays another user: needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv"),
]

# A squatter listening on a loopback port as ``nobody``; its argv even names our daemon
# module, so a check of the command line alone would take it for our server.
SQUATTER = r"""
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
s.settimeout(20)
try:
    while True:
        c, _ = s.accept()
        c.settimeout(5)
        data = c.recv(65536)
        sys.stderr.write("GOT " + data.decode(errors="replace").replace("\n", "|") + "\n")
        sys.stderr.flush()
        c.sendall(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}")
        c.close()
except socket.timeout:
    pass
"""


@pytest.mark.parametrize("recorded_pid", ["squatter", "ours"])
def test_a_squatter_posing_as_the_saved_server_gets_no_token(
    tmp_path: Path, recorded_pid: str
) -> None:
    """A stale state file points at a port another user now listens on: not attached.

    ``ours``: the recorded pid is even a live process of ours named like our server
    (a recycled pid), so only the listening socket's owner tells them apart.
    """
    if sys.platform != "linux":
        pytest.skip("the listener's owner is read from /proc/net/tcp")
    squatter = subprocess.Popen(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            SQUATTER,
            "kernel_agent.llm.local_daemon",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    decoy = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "kernel_agent.llm.local_daemon"]
    )
    try:
        assert squatter.stdout is not None
        port = int(squatter.stdout.readline())
        pid = squatter.pid if recorded_pid == "squatter" else decoy.pid
        gguf = tmp_path / "m.gguf"  # never loaded: the run must stop before serving it
        gguf.write_bytes(b"GGUF" + b"\0" * 64)
        server = LocalModelServer(
            gguf, keep_alive=5, state_dir=tmp_path / "state", log_dir=tmp_path / "logs"
        )
        state_dir = tmp_path / "state"
        state_dir.mkdir(mode=0o700)
        stale = {"pid": pid, "port": port, "token": "SECRET-TOKEN", "model": str(gguf)}
        (state_dir / f"{server.slot()}.json").write_text(json.dumps(stale))
        with pytest.raises(Exception):  # noqa: B017 - a bogus GGUF: the new server fails
            server.start()
        assert not server.reused
    finally:
        time.sleep(0.2)
        decoy.kill()
        decoy.wait()
        squatter.kill()
        _, err = squatter.communicate(timeout=10)
    assert "SECRET-TOKEN" not in err and "GOT" not in err, err


def test_another_user_cannot_use_the_server_or_read_its_state(
    tmp_path: Path, model_home: Path
) -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("needs llama-cpp-python")
    from kernel_agent.llm.local_model import ensure_model

    try:
        model = ensure_model(model_home)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the bundled model is not installed: {e}")
    base = Path(tempfile.mkdtemp(prefix="ka-attack-"))  # under /tmp: nobody can reach it
    os.chmod(base, 0o755)  # so only the state dir's own mode keeps nobody out
    state_dir = base / "state"
    try:
        _probe_as_nobody(model, state_dir, tmp_path)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _probe_as_nobody(model: Path, state_dir: Path, tmp_path: Path) -> None:
    with LocalModelServer(
        model, keep_alive=2, state_dir=state_dir, log_dir=tmp_path / "logs"
    ) as server:
        pid = server.pid
        port = server.base_url.split(":")[2].split("/")[0]
        (state,) = state_dir.glob("*.json")
        probe = (
            "import os, urllib.request, urllib.error\n"
            f"for what in ('listdir', 'open'):\n"
            "    try:\n"
            f"        print(os.listdir('{state_dir}') if what == 'listdir' "
            f"else open('{state}').read())\n"
            "    except OSError as e:\n"
            "        print(what + ':', type(e).__name__)\n"
            f"r = urllib.request.Request('http://127.0.0.1:{port}/v1/models')\n"
            "try:\n    urllib.request.urlopen(r, timeout=30); print('models: 200')\n"
            "except urllib.error.HTTPError as e:\n    print('models:', e.code)\n"
        )
        out = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            + ["/usr/bin/python3", "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert server.api_key not in out.stdout
        assert "listdir: PermissionError" in out.stdout, out.stdout + out.stderr
        assert "open: PermissionError" in out.stdout, out.stdout + out.stderr
        assert "models: 401" in out.stdout, out.stdout + out.stderr
    deadline = time.monotonic() + 25
    while pid is not None and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid is None or not os.path.exists(f"/proc/{pid}")
