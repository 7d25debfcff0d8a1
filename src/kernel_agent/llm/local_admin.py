"""The kept-alive local model servers of this user: list them, stop them.

What ``kernel-agent local status`` and ``kernel-agent local stop`` do. A server is
known by its state file in the private state dir (see :mod:`.local_state`). Nothing
is sent to, or signalled at, a recorded server unless its pid runs as us and is our
server module, and (on Linux) the socket listening on its port is ours: a state file
that outlived its server must not make us signal someone else's process or hand
them the token.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LocalModelError
from .local_daemon import HOST, STATS_PATH
from .local_state import alive, listener_is_ours, ours, read_state

__all__ = ["ServerInfo", "describe", "servers", "stop"]


@dataclass(frozen=True)
class ServerInfo:
    """One recorded server. ``running``: ours and listening (else a stale record).

    ``stats`` is what the server said about itself (``in_flight``, ``idle_s``,
    ``keep_alive``, llama.cpp's counters), or empty if it did not answer.
    """

    state: Path
    pid: int
    port: int
    model: str
    running: bool
    stats: dict[str, Any]


def servers(state_dir: Path, timeout: float = 3.0) -> list[ServerInfo]:
    """The servers recorded in ``state_dir`` (none if it does not exist)."""
    try:
        st = state_dir.lstat()
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise LocalModelError(f"the server state dir {state_dir} is not a directory of ours")
    found = []
    for path in sorted(state_dir.glob("*.json")):
        record = read_state(path)
        if record is None:
            continue
        pid, port, token = record.get("pid"), record.get("port"), record.get("token")
        if not (isinstance(pid, int) and isinstance(port, int) and isinstance(token, str)):
            continue
        running = _serving(pid, port)
        stats = _stats(port, token, timeout) if running else {}
        found.append(ServerInfo(path, pid, port, str(record.get("model", "")), running, stats))
    return found


def describe(info: ServerInfo) -> str:
    """Two lines for a person: which server, and how long it stays."""
    model = Path(info.model).name or "?"
    if not info.running:
        return f"stale record {info.state.name}: pid {info.pid} is not our running server"
    head = f"pid {info.pid}, {HOST}:{info.port}, model {model}"
    s = info.stats
    if not s:
        return f"{head}\n  (it did not answer its stats request)"
    if s.get("in_flight"):
        return f"{head}\n  answering {s['in_flight']} request(s) now"
    idle, keep = float(s.get("idle_s", 0.0)), s.get("keep_alive")
    if keep is None:
        return f"{head}\n  idle {idle:.0f} s; runs until stopped"
    left = max(0.0, float(keep) - idle)
    return (
        f"{head}\n  idle {idle:.0f} s; exits in {left:.0f} s unless a run uses it "
        f"(keep-alive {float(keep):.0f} s)"
    )


def stop(info: ServerInfo, timeout: float = 10.0) -> str:
    """Stop one recorded server: SIGTERM, then SIGKILL after ``timeout``; its state file
    goes. A stale record is only removed. Returns what was done, for a person."""
    if not _serving(info.pid, info.port):  # again: never signal a pid that is not our server
        _remove(info.state, info.pid)
        return f"removed a stale record (pid {info.pid} is not our running server)"
    os.kill(info.pid, signal.SIGTERM)
    if not _wait_gone(info.pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGKILL)
        _wait_gone(info.pid, 5.0)
        _remove(info.state, info.pid)
        return f"killed the local model server (pid {info.pid}; it ignored SIGTERM)"
    _remove(info.state, info.pid)
    return f"stopped the local model server (pid {info.pid})"


def _serving(pid: int, port: int) -> bool:
    """``pid`` is our server module, runs as us, and (on Linux) holds the socket listening
    on 127.0.0.1:``port`` (a recycled pid, or a stale record's port, does not)."""
    if not (ours(pid) and listener_is_ours(port)):
        return False
    if not sys.platform.startswith("linux"):
        return True
    inode = _listening_inode(port)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                return True
    return False


def _listening_inode(port: int) -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":
                return fields[9]
    return "none"


def _stats(port: int, token: str, timeout: float) -> dict[str, Any]:
    req = urllib.request.Request(
        f"http://{HOST}:{port}{STATS_PATH}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 (loopback, ours)
            found = json.loads(r.read(65536))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _remove(path: Path, pid: int) -> None:
    """Remove the state file if it still names ``pid`` (a new server may have replaced it)."""
    record = read_state(path)
    if record is not None and record.get("pid") == pid:
        with contextlib.suppress(OSError):
            path.unlink()
