"""The kept-alive local model server's private state dir, its locks and its checks.

``<state dir>/<slot>.json`` names a running server (pid, port, token, model file);
``<slot>.lock`` serialises starting it; clients hold a shared ``flock`` on
``<slot>.lease`` while they use it. Before a client trusts a recorded server it checks
that the pid runs as us and is our server module, and (on Linux) that the socket
listening on the recorded port is ours: a server that died leaves a port another
user could take, and the token must never reach them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from ..errors import LocalModelError

__all__ = [
    "DAEMON",
    "alive",
    "listener_is_ours",
    "lock_file",
    "ours",
    "private_dir",
    "read_state",
    "take_lease",
    "try_flock",
    "wait_gone",
]

DAEMON = "kernel_agent.llm.local_daemon"


def private_dir(path: Path) -> Path:
    """``path`` as a directory only we can enter (0700, ours, not a symlink)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        st = path.lstat()
    except OSError as e:
        raise LocalModelError(f"cannot create the server state dir {path}: {e.strerror}") from e
    if not stat.S_ISDIR(st.st_mode):
        raise LocalModelError(f"the server state dir {path} is not a directory")
    if st.st_uid != os.getuid():
        raise LocalModelError(f"the server state dir {path} belongs to another user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


async def lock_file(path: Path, timeout: float) -> int:
    """An fd holding ``LOCK_EX`` on ``path`` (polled, so a cancelled wait leaks nothing)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if loop.time() >= deadline:
                    raise LocalModelError(
                        f"another run kept {path} locked for {timeout:g}s"
                    ) from None
                await asyncio.sleep(0.1)
    except BaseException:
        os.close(fd)
        raise


def take_lease(path: Path) -> int | None:
    """An fd holding a shared lock on the lease file; None if the server is exiting."""
    return try_flock(path, fcntl.LOCK_SH)


def try_flock(path: Path, mode: int) -> int | None:
    """An fd holding ``mode`` (``LOCK_SH``/``LOCK_EX``) on ``path`` (made 0600, never
    through a link), or None when a conflicting lock is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is not alive
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


async def wait_gone(pid: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while alive(pid) and loop.time() < deadline:
        await asyncio.sleep(0.05)


def ours(pid: int) -> bool:
    """``pid`` is alive, runs as us, and is our server module."""
    if sys.platform.startswith("linux"):
        try:
            if os.stat(f"/proc/{pid}").st_uid != os.getuid():
                return False
        except OSError:
            return False
    return alive(pid) and DAEMON in _cmdline(pid)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return DAEMON if not sys.platform.startswith("linux") else ""


def listener_is_ours(port: int) -> bool:
    """On Linux: the socket listening on 127.0.0.1:``port`` belongs to our uid."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return not sys.platform.startswith("linux")
    want = f"0100007F:{port:04X}"
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == want and fields[3] == "0A":  # LISTEN
            return int(fields[7]) == os.getuid()
    return False
