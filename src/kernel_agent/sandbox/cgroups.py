"""Bounds for a whole sandbox (every process in it), with cgroups where the host allows.

``RLIMIT_AS`` bounds one process: three processes could each hold the limit. A
cgroup bounds them together: ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1),
``pids.max``, and ``cpu.max``/``cpu.cfs_quota_us`` when a CPU share is asked for.
With a memory bound, swap is bounded too where the host accounts for it:
``memory.swap.max`` = 0 (v2), ``memory.memsw.limit_in_bytes`` = the memory bound (v1),
so the sandbox cannot spill past its bound into swap.

The kernel joins its cgroup before it starts: the limits wrapper (which runs as the
agent, before the uid drop) writes its own pid into ``cgroup.procs`` of each
directory and then execs bwrap, so everything in the sandbox is inside. Where no
cgroup can be made (no write access, a v2 hierarchy that delegates no controllers),
:func:`create_cgroup` returns None and the rlimits are the bound; the sandbox status
says which applied.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path

from .limits import ResourceLimits

__all__ = ["Cgroup", "create_cgroup", "cgroup_support", "default_cpu_cores", "prune_cgroups"]

_ROOT = Path("/sys/fs/cgroup")
_PREFIX = "kernel-agent-"
_PERIOD_US = 100_000


@dataclass
class Cgroup:
    """The cgroup dirs of one kernel; ``controllers`` are those with a limit set."""

    version: str  # "v2" or "v1"
    dirs: tuple[Path, ...]
    controllers: tuple[str, ...]
    #: swap is bounded with the memory (see the module docstring)
    swap: bool = False

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def describe(self) -> str:
        names = [*self.controllers, *(["swap"] if self.swap else [])]
        return f"cgroup {self.version} ({', '.join(names)})"

    def remove(self) -> None:
        """Kill whatever is left inside, then remove the dirs."""
        for d in self.dirs:
            for _ in range(50):
                pids = _pids(d)
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                _sleep(0.02)
            with contextlib.suppress(OSError):
                d.rmdir()


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def _pids(d: Path) -> list[int]:
    try:
        return [int(p) for p in (d / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _wanted(
    limits: ResourceLimits, cpu_cores: float | None
) -> dict[str, list[tuple[str, str, str]]]:
    """controller -> [(v2 file, v1 file, value)]"""
    out: dict[str, list[tuple[str, str, str]]] = {}
    if limits.memory_mb is not None:
        size = str(limits.memory_mb * 1024 * 1024)
        out["memory"] = [("memory.max", "memory.limit_in_bytes", size)]
    if limits.max_processes is not None:
        out["pids"] = [("pids.max", "pids.max", str(limits.max_processes))]
    if cpu_cores:
        quota = str(int(cpu_cores * _PERIOD_US))
        out["cpu"] = [("cpu.max", "cpu.cfs_quota_us", f"{quota} {_PERIOD_US}")]
    return out


def _v2(name: str, wanted: dict[str, list[tuple[str, str, str]]]) -> Cgroup | None:
    if not (_ROOT / "cgroup.controllers").is_file():
        return None
    parent = _ROOT / _own_paths().get("", "/").lstrip("/")
    available = set((parent / "cgroup.controllers").read_text().split())
    if not set(wanted) <= available:
        return None
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    missing = [c for c in wanted if c not in enabled]
    if missing:
        # fails (EBUSY) when our own cgroup holds processes and is not the root
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
    d = parent / name
    d.mkdir(mode=0o700)
    try:
        for settings in wanted.values():
            for v2_file, _, value in settings:
                (d / v2_file).write_text(value)
    except OSError:
        d.rmdir()
        raise
    swap = "memory" in wanted and _try_write(d / "memory.swap.max", "0")
    return Cgroup("v2", (d,), tuple(wanted), swap)


def _v1(name: str, wanted: dict[str, list[tuple[str, str, str]]]) -> Cgroup | None:
    own = _own_paths()
    made: list[Path] = []
    swap = False
    try:
        for controller, settings in wanted.items():
            mount = _ROOT / controller
            if not (mount / "cgroup.procs").is_file():
                raise OSError(f"no cgroup v1 {controller} hierarchy")
            d = mount / own.get(controller, "/").lstrip("/") / name
            d.mkdir(mode=0o700)
            made.append(d)
            for _, v1_file, value in settings:
                if v1_file == "cpu.cfs_quota_us":
                    quota, period = value.split()
                    (d / "cpu.cfs_period_us").write_text(period)
                    value = quota
                (d / v1_file).write_text(value)
            if controller == "memory":  # memory + swap, no more than the memory alone
                swap = _try_write(d / "memory.memsw.limit_in_bytes", settings[0][2])
    except OSError:
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return Cgroup("v1", tuple(made), tuple(wanted), swap)


def _try_write(path: Path, value: str) -> bool:
    """Write a control file the host may not have (no swap accounting); whether it took."""
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def create_cgroup(limits: ResourceLimits, cpu_cores: float | None = None) -> Cgroup | None:
    """A fresh cgroup with ``limits`` applied, or None where this host allows none."""
    wanted = _wanted(limits, cpu_cores)
    if not wanted or not _ROOT.is_dir():
        return None
    name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    for make in (_v2, _v1):
        try:
            group = make(name, wanted)
        except (OSError, ValueError):
            continue
        if group is not None:
            return group
    return None


def cgroup_support(limits: ResourceLimits, cpu_cores: float | None = None) -> str | None:
    """``"cgroup v1 (memory, pids)"`` when a cgroup can be made here, else None (probed once)."""
    key = (limits.memory_mb, limits.max_processes, cpu_cores)
    if key not in _SUPPORT:
        group = create_cgroup(limits, cpu_cores)
        _SUPPORT[key] = group.describe() if group else None
        if group is not None:
            group.remove()
    return _SUPPORT[key]


_SUPPORT: dict[tuple[int | None, int | None, float | None], str | None] = {}


def default_cpu_cores(limits: ResourceLimits) -> float | None:
    """The host's cores but one (at least one) when a cgroup can bound the CPU here, else None.

    So a kernel cannot take every core from the agent and the host (5.6).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    share = float(max(1, cores - 1))
    found = cgroup_support(limits, share)
    return share if found is not None and "cpu" in found.split("(", 1)[1] else None


def prune_cgroups() -> list[Path]:
    """Remove the empty kernel cgroups left by agents that provably died; the removed ones.

    A dir ``kernel-agent-PID-...`` beside ours goes when no process PID exists in this
    pid namespace, and only if it is empty (``rmdir`` refuses otherwise: nothing is killed).
    The parent is this agent's own cgroup, which an agent in another pid namespace
    (a container) does not share.
    """
    removed: list[Path] = []
    own = _own_paths()
    parents: set[Path] = set()
    if (_ROOT / "cgroup.controllers").is_file():
        parents.add(_ROOT / own.get("", "/").lstrip("/"))
    for controller in ("memory", "pids", "cpu"):
        if (_ROOT / controller / "cgroup.procs").is_file():
            parents.add(_ROOT / controller / own.get(controller, "/").lstrip("/"))
    for parent in parents:
        try:
            names = [n for n in os.listdir(parent) if n.startswith(_PREFIX)]
        except OSError:
            continue
        for name in names:
            pid = name[len(_PREFIX) :].split("-", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid() or Path(f"/proc/{pid}").exists():
                continue
            with contextlib.suppress(OSError):
                (parent / name).rmdir()
                removed.append(parent / name)
    return removed
