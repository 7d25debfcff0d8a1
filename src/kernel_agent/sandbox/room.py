"""A kernel's own rooms on the host: a private work dir, a connection dir and a log.

Each kernel gets a fresh directory ``R`` (mode 0700, the agent's) under the system
temp dir, holding:

- ``R/w``: the kernel's work dir and cwd, owned by the kernel's uid. It starts with
  one symlink per entry of the user's directory (the *view*, which the sandbox
  shows read-only), so ``pd.read_csv("sales.csv")`` works while nothing of the
  user's can be changed; new files the kernel writes stay here.
- ``R/c``: the connection file and ipc sockets, owned by the kernel's uid. ``R`` is
  root-only, so no other kernel can reach into it, whatever its uid.
- ``R/kernel.log``: the kernel's stdout and stderr (never the agent's terminal).

The host never follows a path inside ``R/w``: it reads from there only through
:mod:`kernel_agent.safefs`. Nothing outside ``R`` is chowned or chmodded, ever.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .cgroups import Cgroup
from .uids import UidLease

__all__ = ["Room", "make_room", "check_view_dir", "VIEW_LINKS_MAX"]

#: at most this many entries of the user's directory are linked into the work dir
VIEW_LINKS_MAX = 2000

_SYSTEM_DIRS = {
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
    "/var", "/var/tmp", "/var/lib", "/var/run", "/dev/shm", "/usr/local",
}  # fmt: skip


def check_view_dir(path: Path) -> str | None:
    """Why ``path`` must not be a kernel's directory, or None when it may be.

    ``/``, ``/tmp``, system directories, the home directory and its ancestors are
    refused: they hold other people's files, or the user's keys and dotfiles.
    """
    resolved = path.resolve()
    if str(resolved) in _SYSTEM_DIRS:
        return f"{resolved} is a system directory"
    home = Path(os.path.expanduser("~")).resolve()
    if resolved == home or resolved in home.parents:
        return f"{resolved} is your home directory or holds it"
    return None


@dataclass
class Room:
    """What one kernel owns on the host; :meth:`remove` takes it all away."""

    root: Path
    conn: Path
    work: Path
    log: Path
    lease: UidLease | None = None
    cgroup: Cgroup | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)

    def log_tail(self, limit: int = 600) -> str:
        """The end of what the kernel printed (for a start that failed)."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - limit))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-3:])

    def remove(self) -> None:
        if self.log_file is not None:
            with contextlib.suppress(OSError):
                self.log_file.close()
            self.log_file = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        shutil.rmtree(self.root, ignore_errors=True)
        if self.lease is not None:
            self.lease.release()
            self.lease = None


def _base_dir() -> str:
    # unix socket paths are limited to ~107 bytes: keep the prefix short
    base = tempfile.gettempdir()
    return base if len(base) <= 40 else "/tmp"


def _link_view(work: Path, view: Path | None, files: tuple[Path, ...]) -> None:
    targets: dict[str, Path] = {}
    if view is not None:
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(view))[:VIEW_LINKS_MAX]:
                targets[name] = view / name
    for file in files:  # --file wins over a view entry of the same name
        targets[file.name] = file
    for name, target in targets.items():
        with contextlib.suppress(OSError):
            os.symlink(target, work / name)


def make_room(
    uid: int,
    gid: int,
    view: Path | None,
    lease: UidLease | None = None,
    files: tuple[Path, ...] = (),
) -> Room:
    """A fresh room for a kernel running as ``uid``/``gid``; its work dir links the
    entries of ``view`` and the ``files`` (absolute paths) by name."""
    root = Path(tempfile.mkdtemp(prefix="ka-", dir=_base_dir())).resolve()
    room = Room(root, root / "c", root / "w", root / "kernel.log", lease)
    try:
        for sub in (room.conn, room.work):
            sub.mkdir(mode=0o700)
            if sub == room.work:
                _link_view(sub, view, files)
            os.chown(sub, uid, gid)
        room.log_file = open(room.log, "wb")  # noqa: SIM115 - closed in remove()
    except BaseException:
        room.remove()
        raise
    return room
