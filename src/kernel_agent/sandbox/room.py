"""A kernel's own rooms on the host: a private work dir, a connection dir and a log.

Each kernel gets a fresh directory ``R`` (mode 0700, the agent's) under the system
temp dir, holding:

- ``R/w``: the kernel's work dir and cwd, owned by the kernel's uid. It starts with
  one symlink per entry of the user's directory (the *view*, which the sandbox
  shows read-only), so ``pd.read_csv("sales.csv")`` works while nothing of the
  user's can be changed; new files the kernel writes stay here.
- ``R/c``: the connection file and ipc sockets. ``R`` is root-only, so no other
  kernel can reach into it, whatever its uid. When the kernel runs as another uid,
  ``c`` and the connection file belong to the agent, with the kernel's group: ``c``
  is group-writable (sticky) only while a kernel starts, so that it can bind its
  sockets, and :meth:`Room.seal` takes that away once it answers. A kernel can then
  never swap a socket for a symlink that the agent's reconnects would follow (the
  limits wrapper gives the write bit back, as the agent, when a new kernel starts).
  With ``disk_mb`` (a sandboxed kernel, the agent root), ``R/w`` is a filesystem of
  its own: a sparse ext4 image ``R/disk.img`` of that size, loop-mounted ``nosuid,nodev``,
  so the kernel cannot fill the host's disk (it gets ``ENOSPC``). Made in ~40 ms;
  where it cannot be made (no ``mkfs.ext4``, no loop device), a plain directory.
- ``R/kernel.log``: the kernel's stdout and stderr (never the agent's terminal).
- ``R/agent``: which agent made the room (pid namespace, pid, start time), so a
  later agent can remove rooms whose agent provably died (:func:`prune_rooms`).
- ``R/keeper`` (a ``serve`` session's room, :func:`keep_room`): the index of the server
  that will collect the room's files after its own crash. No other process prunes the
  room while that index lists its session as live: a crash never loses a session's files.

The host never follows a path inside ``R/w``: it reads from there only through
:mod:`kernel_agent.edges.safefs`. Nothing outside ``R`` is chowned or chmodded, ever.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .cgroups import Cgroup
from .uids import UidLease

__all__ = [
    "Room",
    "make_room",
    "check_view_dir",
    "out_of_reach",
    "prune_rooms",
    "keep_room",
    "agent_stamp",
    "VIEW_LINKS_MAX",
    "CONN_OPEN",
    "CONN_SEALED",
]

#: at most this many entries of the user's directory are linked into the work dir
VIEW_LINKS_MAX = 2000

#: the connection dir's mode while a kernel of another uid starts, and once it answered
CONN_OPEN = 0o1770
CONN_SEALED = 0o1750
_PREFIX = "ka-"
_KEEPER = "keeper"
#: a server's index larger than this is not read by others' housekeeping: its rooms stay
_INDEX_MAX = 64 * 1024 * 1024
_ROOM_NAME = re.compile(rf"{_PREFIX}[0-9a-z_]+$")  # as tempfile.mkdtemp names them

_SYSTEM_DIRS = {
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
    "/var", "/var/tmp", "/var/lib", "/var/run", "/dev/shm", "/usr/local",
}  # fmt: skip


def out_of_reach(files: tuple[Path, ...]) -> str | None:
    """Why a kernel with a uid of its own could not read one of the ``files`` it is given
    (``--file``), or None when it can read them all.

    Such a kernel is "others" to every file of the host (ACLs aside). Each file is bound
    into its sandbox at its own path, under directories bwrap makes for it, so only the
    file's own mode counts. The directory a kernel is shown (``--cwd``) is not refused
    here: a run that needs none of its files (a question with no data, ``verify`` of a
    notebook kept in a private directory) works from a 0700 one.
    """
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_mode & stat.S_IROTH != stat.S_IROTH:
            return (
                f"the kernel runs as a user of its own and cannot read {path}: it is mode "
                f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}; make it readable to "
                f"others (chmod o+r {path})"
            )
    return None


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
    #: the kernel's uid
    uid: int = -1
    #: the size of the work dir's own filesystem, None when it is a plain directory
    disk_mb: int | None = None
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

    def seal(self, ipc_paths: list[Path], uid: int) -> None:
        """Take the kernel's write access to ``conn`` away, then check that every
        ``ipc_paths`` entry is a unix socket of ``uid``, not a link (OSError if not).

        Called once the kernel answered, before the agent relies on the sockets for
        the kernel's life (zmq reconnects by path, as the agent). The chmod comes
        first, so nothing can change after the check. A kernel of the agent's own uid
        (no uid drop) could give itself the bit back: there it is the check only.
        """
        if os.stat(self.conn).st_uid == os.geteuid() and uid != os.geteuid():
            os.chmod(self.conn, CONN_SEALED)
        check_sockets(ipc_paths, uid)

    def remove(self) -> None:
        if self.log_file is not None:
            with contextlib.suppress(OSError):
                self.log_file.close()
            self.log_file = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        remove_tree(self.root)
        if self.lease is not None:
            self.lease.release()
            self.lease = None


def check_sockets(paths: list[Path], uid: int, missing_ok: bool = False) -> None:
    """OSError unless each path is a unix socket owned by ``uid`` (a link is refused)."""
    for path in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if missing_ok:
                continue
            raise OSError(f"{path.name} is missing") from None
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(f"{path.name} is not a socket (mode {st.st_mode:o})")
        if st.st_uid != uid:
            raise OSError(f"{path.name} belongs to uid {st.st_uid}, not the kernel's {uid}")


def agent_stamp(pid: int | None = None) -> str:
    """``"<pid namespace> <pid> <start time>"`` of a process (this one by default)."""
    pid = os.getpid() if pid is None else pid
    ns = os.stat(f"/proc/{pid}/ns/pid").st_ino
    stat_line = Path(f"/proc/{pid}/stat").read_text()
    start = stat_line.rpartition(")")[2].split()[19]
    return f"{ns} {pid} {start}"


def _stamp_dead(stamp: str) -> bool:
    """Whether the agent of ``stamp`` is provably gone (same pid namespace as us)."""
    fields = stamp.split()
    if len(fields) != 3 or not fields[1].isdigit():
        return False
    ns, pid, _ = fields
    try:
        if str(os.stat("/proc/self/ns/pid").st_ino) != ns:
            return False  # another namespace: its pids are not ours to judge
        return agent_stamp(int(pid)) != stamp
    except FileNotFoundError:
        return True  # no such process
    except (OSError, ValueError, IndexError):
        return False


def prune_rooms(base: str | None = None) -> list[Path]:
    """Remove the rooms (ours, by uid) whose agent has died; the removed ones.

    Only a room whose ``agent`` stamp names a process of our pid namespace that is
    no longer alive (or is another process now, by start time) goes, and not one a
    server keeps (:func:`keep_room`) while its index says the session has not ended.
    """
    base = base or _base_dir()
    removed: list[Path] = []
    try:
        names = [n for n in os.listdir(base) if n.startswith(_PREFIX)]
    except OSError:
        return removed
    for name in names:
        if not _ROOM_NAME.match(name):
            continue
        root = Path(base) / name
        try:
            st = os.lstat(root)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                continue
            stamp = (root / "agent").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        if _stamp_dead(stamp.strip()) and not _kept(root):
            remove_tree(root)
            removed.append(root)
    return removed


def keep_room(work: Path, index: Path) -> None:
    """Leave the room of the work dir ``work`` to the server whose session index is
    ``index``: after that server dies, :func:`prune_rooms` (in any process) keeps the
    room while the index lists a session with this work dir as ``live``, so the
    server's next start delivers its files. ValueError for a path that is no room."""
    root = work.parent
    if work.name != "w" or not _ROOM_NAME.match(root.name):
        raise ValueError(f"{work} is not a kernel's work dir")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with os.fdopen(os.open(root / _KEEPER, flags, 0o600), "w", encoding="utf-8") as fh:
        fh.write(str(index))


def _kept(root: Path) -> bool:
    """Whether the server named in ``root/keeper`` still lists the room's session as
    live. When that cannot be told (an unreadable or huge index), the room is kept."""
    try:
        index = (root / _KEEPER).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return False  # no server's room
    except (OSError, ValueError):
        return True
    try:
        with open(index, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > _INDEX_MAX:
                return True
            data = json.loads(fh.read(_INDEX_MAX))
    except FileNotFoundError:
        return False  # the server's state is gone: no one will collect the room
    except OSError:
        return True
    except (ValueError, RecursionError):
        return False  # written whole (renamed into place): the server cannot read it either
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, list):
        return False
    work = os.path.realpath(root / "w")
    return any(
        isinstance(entry, dict)
        and entry.get("status") == "live"
        and isinstance(entry.get("work_dir"), str)
        and os.path.realpath(entry["work_dir"]) == work
        for entry in sessions
    )


def remove_tree(root: Path) -> None:
    """Remove a room, unmounting its work dir's filesystem first (lazily: a process
    still inside keeps it until it goes; the loop device is freed with it)."""
    work = root / "w"
    if os.path.ismount(work):
        subprocess.run(["umount", "-l", str(work)], capture_output=True, check=False)
    if not os.path.ismount(work):
        shutil.rmtree(root, ignore_errors=True)


def _mount_disk(room: Room, size_mb: int, uid: int, gid: int) -> bool:
    """Make ``room.work`` an ext4 filesystem of ``size_mb`` (see the module docstring)."""
    mkfs, mount = shutil.which("mkfs.ext4"), shutil.which("mount")
    if mkfs is None or mount is None:
        return False
    image = room.root / "disk.img"
    try:
        with open(image, "xb") as fh:
            fh.truncate(size_mb * 1024 * 1024)
        subprocess.run(
            [mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal",
             "-E", f"lazy_itable_init=1,lazy_journal_init=1,root_owner={uid}:{gid}", str(image)],
            capture_output=True, check=True, timeout=30,
        )  # fmt: skip
        subprocess.run(
            [mount, "-o", "loop,nosuid,nodev", str(image), str(room.work)],
            capture_output=True, check=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        with contextlib.suppress(OSError):
            image.unlink()
        return False
    with contextlib.suppress(OSError):
        (room.work / "lost+found").rmdir()
    return True


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
    disk_mb: int | None = None,
) -> Room:
    """A fresh room for a kernel running as ``uid``/``gid``; its work dir links the
    entries of ``view`` and the ``files`` (absolute paths) by name, on a filesystem of
    ``disk_mb`` where one can be made (``room.disk_mb`` says)."""
    root = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=_base_dir())).resolve()
    room = Room(root, root / "c", root / "w", root / "kernel.log", lease, uid=uid)
    try:
        with contextlib.suppress(OSError):
            (root / "agent").write_text(agent_stamp(), encoding="ascii")
        room.work.mkdir(mode=0o700)
        if disk_mb and os.geteuid() == 0 and _mount_disk(room, disk_mb, uid, gid):
            room.disk_mb = disk_mb
            os.chmod(room.work, 0o700)
        _link_view(room.work, view, files)
        os.chown(room.work, uid, gid)
        room.conn.mkdir(mode=0o700)
        if uid != os.geteuid():
            # the agent's, with the kernel's group: writable until sealed
            os.chown(room.conn, os.geteuid(), gid)
            os.chmod(room.conn, CONN_OPEN)
        room.log_file = open(room.log, "wb")  # noqa: SIM115 - closed in remove()
    except BaseException:
        room.remove()
        raise
    return room
