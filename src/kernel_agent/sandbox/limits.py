"""Resource limits for the kernel process: address space, CPU time, file size, processes.

The limits are applied by a tiny exec wrapper (``python -I -S -c ...``) that sets
them with ``setrlimit`` and then ``exec``\\ s the real command, so they hold with or
without the sandbox and need neither ``prlimit`` nor a ``preexec_fn`` (which is not
safe in a process with threads, and the agent has zmq and asyncio threads).

Soft and hard limits are set equal, so code in the kernel cannot raise them again.
``RLIMIT_NPROC`` counts every process of the kernel's *user*; Linux does not enforce
it for root, so it only bounds a fork bomb when the kernel runs as another uid (the
sandbox drops to one when the agent runs as root).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["ResourceLimits", "exec_wrapper_argv"]

_MB = 1024 * 1024

# The wrapper: argv is  NAME=VALUE ... [--ignore-sigint] [--cgroup=PROCS] [--unseal=DIR]
# [--fd=FILE] -- CMD ARGS...
# A hard limit already lower than asked for is kept (an unprivileged process
# cannot raise it, and lower is stricter anyway). --cgroup moves the wrapper (and so
# everything it execs and forks) into a cgroup, before any uid drop. --unseal gives
# the kernel's group its write bit on its connection dir back (a new kernel must bind
# its sockets there; see room.Room.seal): the one before it is dead by then. --fd
# opens FILE for reading, inheritable, and puts its number in place of each "{fd}"
# of the command (bwrap's --seccomp FD).
_WRAPPER = """\
import os, resource, signal, sys
args = sys.argv[1:]
split = args.index("--")
for spec in args[:split]:
    if spec == "--ignore-sigint":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        continue
    if spec.startswith("--cgroup="):
        with open(spec[9:], "w") as fh:
            fh.write(str(os.getpid()))
        continue
    if spec.startswith("--unseal="):
        os.chmod(spec[9:], 0o1770)
        continue
    if spec.startswith("--fd="):
        fd = os.open(spec[5:], os.O_RDONLY | os.O_NOFOLLOW)
        os.set_inheritable(fd, True)
        args = [str(fd) if a == "{fd}" else a for a in args]
        continue
    name, value = spec.split("=")
    which = getattr(resource, name)
    hard = resource.getrlimit(which)[1]
    value = int(value)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))
os.execvp(args[split + 1], args[split + 1:])
"""


@dataclass(frozen=True)
class ResourceLimits:
    """Per-process limits for a kernel; ``None`` means no limit of that kind."""

    memory_mb: int | None = None
    cpu_time_s: int | None = None
    file_size_mb: int | None = None
    max_processes: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ResourceLimits:
        return cls(
            memory_mb=settings.memory_limit_mb,
            cpu_time_s=settings.cpu_time_limit_s,
            file_size_mb=settings.file_size_limit_mb,
            max_processes=settings.max_processes,
        )

    def rlimits(self) -> dict[str, int]:
        """``{"RLIMIT_AS": bytes, ...}`` for the limits that are set."""
        out: dict[str, int] = {}
        if self.memory_mb is not None:
            out["RLIMIT_AS"] = self.memory_mb * _MB
        if self.cpu_time_s is not None:
            out["RLIMIT_CPU"] = self.cpu_time_s
        if self.file_size_mb is not None:
            out["RLIMIT_FSIZE"] = self.file_size_mb * _MB
        if self.max_processes is not None:
            out["RLIMIT_NPROC"] = self.max_processes
        return out

    def as_dict(self) -> dict[str, int | None]:
        return {
            "memory_mb": self.memory_mb,
            "cpu_time_s": self.cpu_time_s,
            "file_size_mb": self.file_size_mb,
            "max_processes": self.max_processes,
        }

    def describe(self) -> str:
        parts = []
        if self.memory_mb is not None:
            parts.append(f"memory {self.memory_mb} MB")
        if self.cpu_time_s is not None:
            parts.append(f"CPU {self.cpu_time_s} s")
        if self.file_size_mb is not None:
            parts.append(f"file size {self.file_size_mb} MB")
        if self.max_processes is not None:
            parts.append(f"processes {self.max_processes}")
        return ", ".join(parts) if parts else "none"

    def __bool__(self) -> bool:
        return bool(self.rlimits())


def exec_wrapper_argv(
    limits: ResourceLimits,
    *,
    ignore_sigint: bool = False,
    python: str | None = None,
    cgroup_procs: list[str] | tuple[str, ...] = (),
    unseal: list[str] | tuple[str, ...] = (),
    fd_file: str | None = None,
) -> list[str]:
    """The argv prefix that applies ``limits`` and then execs the command after it.

    ``ignore_sigint`` makes the wrapped command start with SIGINT ignored (the
    disposition survives ``exec``): bwrap then survives the process-group SIGINT of
    an interrupt, while ipykernel installs its own handler and still gets it.
    ``cgroup_procs`` are ``cgroup.procs`` files the command joins before it runs.
    ``unseal`` are connection dirs whose group write bit comes back (as the agent),
    last, just before the exec. ``fd_file`` is opened and its fd number replaces the
    argument ``{fd}`` of the command. Empty when there is nothing to do.
    """
    specs = [f"{name}={value}" for name, value in limits.rlimits().items()]
    if ignore_sigint:
        specs.append("--ignore-sigint")
    specs += [f"--cgroup={path}" for path in cgroup_procs]
    specs += [f"--fd={fd_file}"] if fd_file else []
    specs += [f"--unseal={path}" for path in unseal]
    if not specs or not hasattr(os, "execvp") or sys.platform == "win32":
        return []
    return [python or sys.executable, "-I", "-S", "-c", _WRAPPER, *specs, "--"]
