"""One uid per sandboxed kernel, leased from a range no account uses.

When the agent runs as root, each kernel drops to its own uid (and a gid of the
same number), so two kernels cannot read each other's files, share a keyring or
share a process budget (``RLIMIT_NPROC`` counts per uid). The uids need no
``/etc/passwd`` entry: ``setpriv`` takes numbers.

A lease is an exclusive ``flock`` on a file named after the uid in a root-only
directory. The kernel holds no such fd; the agent does, for the kernel's life, and
the kernel loses it with the agent (a crashed agent frees its uids). The range is
large and the pick random, so a uid is rarely handed out again soon after.

The same leases serve every process that handles what a kernel made without root's
powers (Chromium's renders, the exporter and comparer of
:mod:`kernel_agent.notebook.worker`): :func:`leased_user` leases one for a block,
:func:`drop_argv` is the ``setpriv`` prefix that becomes it, and :func:`kill_uid`
ends whatever of it is left.

Lock files no one holds are removed (:func:`prune_leases`, once per process, at the
first lease). That is safe because a lease counts only if, once locked, its fd is
still the file at that name: a lease that locked a file just pruned tries again.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import pwd
import secrets
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "UidLease",
    "lease_uid",
    "leased_user",
    "drop_argv",
    "kill_uid",
    "prune_leases",
    "uid_range",
    "UID_BASE",
    "UID_COUNT",
    "NOBODY",
]

log = logging.getLogger(__name__)

#: the preferred range: far above any account, below 2**31 (some tools sign uids)
UID_BASE = 1_900_000_000
UID_COUNT = 1_000_000
_SMALL_RANGE = 4096  # when the user namespace we live in maps fewer uids
#: the uid used when none can be leased
NOBODY = 65534


def _mapped_ranges(uid_map: str | None = None) -> list[tuple[int, int]]:
    """(first, count) of the uids this process's user namespace can use."""
    if uid_map is None:
        try:
            uid_map = Path("/proc/self/uid_map").read_text()
        except OSError:
            return [(0, 2**32 - 1)]
    out = []
    for line in uid_map.splitlines():
        fields = line.split()
        if len(fields) == 3:
            out.append((int(fields[0]), int(fields[2])))
    return out


def uid_range(uid_map: str | None = None) -> tuple[int, int]:
    """(first, count) of the uids to lease from, inside what this namespace maps."""
    ranges = _mapped_ranges(uid_map)
    for first, count in ranges:
        if first <= UID_BASE and UID_BASE + UID_COUNT <= first + count:
            return UID_BASE, UID_COUNT
    # a narrow map (rootless containers): the top of the largest range, away from accounts
    first, count = max(ranges, key=lambda r: r[1])
    top = first + count
    size = min(_SMALL_RANGE, max(count - 10_000, 0))
    return top - size, size


def _lock_dir() -> Path:
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    path = base / "kernel-agent-uids"
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.lstat()
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not path.is_dir() or path.is_symlink():
        raise OSError(f"{path} is not a private directory of ours")
    return path


@dataclass
class UidLease:
    """A uid (and gid) that no other kernel holds while this lease is open."""

    uid: int
    gid: int
    _fd: int = field(default=-1, repr=False)
    _path: Path | None = field(default=None, repr=False)

    def release(self) -> None:
        if self._fd >= 0:
            if self._path is not None:  # still locked: see the module docstring
                with contextlib.suppress(OSError):
                    os.unlink(self._path)
            os.close(self._fd)
            self._fd = -1


def _open_lock(path: Path) -> int | None:
    """An fd holding the lock on ``path``, or None if someone else holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        here = os.stat(path, follow_symlinks=False)
        mine = os.fstat(fd)
    except (BlockingIOError, FileNotFoundError):
        os.close(fd)
        return None
    if (here.st_dev, here.st_ino) != (mine.st_dev, mine.st_ino):
        os.close(fd)  # pruned (and perhaps made again) between our open and our lock
        return None
    return fd


def prune_leases(folder: Path | None = None) -> int:
    """Remove the lock files no one holds; how many went."""
    folder = folder or _lock_dir()
    removed = 0
    for name in os.listdir(folder):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fd = _open_lock(folder / name)
            if fd is not None:
                try:
                    os.unlink(folder / name)  # while locked: see the module docstring
                    removed += 1
                finally:
                    os.close(fd)
    return removed


@functools.cache
def _pruned_once() -> None:
    with contextlib.suppress(OSError):
        prune_leases()


def lease_uid(attempts: int = 64) -> UidLease:
    """Lease a free uid from :func:`uid_range`; OSError when none can be had."""
    first, count = uid_range()
    if count <= 0:
        raise OSError("no uid range to run sandboxed kernels in")
    folder = _lock_dir()
    _pruned_once()
    for _ in range(attempts):
        uid = first + secrets.randbelow(count)
        try:
            pwd.getpwuid(uid)
            continue  # an account has it
        except KeyError:
            pass
        fd = _open_lock(folder / str(uid))
        if fd is None:
            continue
        return UidLease(uid, uid, fd, folder / str(uid))
    raise OSError(f"no free uid in {first}..{first + count - 1} after {attempts} tries")


@contextlib.contextmanager
def leased_user(purpose: str) -> Iterator[int]:
    """The uid to run ``purpose`` as: -1 (ourselves) unless we are root; then a leased
    one (``nobody`` when none can be leased), whose processes are killed at the end."""
    if os.geteuid() != 0:
        yield -1
        return
    try:
        lease = lease_uid()
    except OSError as exc:
        log.info("no uid to lease for %s (%s); running it as nobody", purpose, exc)
        yield NOBODY
        return
    try:
        yield lease.uid
    finally:
        kill_uid(lease.uid)  # leased to us alone: nothing of it may outlive the block
        lease.release()


def drop_argv(uid: int) -> list[str]:
    """The ``setpriv`` prefix that runs a command as ``uid`` (and gid) with no groups, no
    capabilities and ``no_new_privs``; [] for -1 (stay ourselves). OSError without setpriv."""
    if uid < 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise OSError("setpriv (util-linux) is needed to run as an unprivileged user")
    return [
        setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
        "--inh-caps=-all", "--bounding-set=-all", "--",
    ]  # fmt: skip


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a leased uid: only our own work used it)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:  # status, not the dir's owner: a non-dumpable process's dir is root's
            with open(f"{entry.path}/status", encoding="ascii", errors="replace") as fh:
                uids = next((line.split()[1:] for line in fh if line.startswith("Uid:")), [])
            if str(uid) in uids:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue
