"""Run one of our Python modules as a leased, unprivileged uid: bytes in, bytes out.

What reads or transforms a kernel's bytes or a stranger's notebook (nbconvert, Pillow,
the comparer) runs as root only by mistake. :func:`run_module` runs
``python -m MODULE ARGS`` as a uid leased from :mod:`kernel_agent.sandbox.uids`
(``setpriv``: no groups, no capabilities, ``no_new_privs``), with:

- a cleared environment (no keys or tokens), ``HOME``, ``TMPDIR`` and the working
  directory a fresh empty directory (on a bounded tmpfs of its own under bwrap; else a
  directory of that uid, removed afterwards);
- rlimits set before the module is imported: address space, CPU time, file size, open
  files, processes, no core dumps (:data:`LIMITS`);
- the request on stdin and the answer on stdout, read up to ``max_output`` bytes and
  within ``timeout`` seconds (past either the uid's processes are killed);
- every process of the uid killed when it is done.

The worker cannot open a file that only root (or the user) may read: that holds by
construction, whatever a payload makes nbconvert or Pillow try.

Where bubblewrap works (:func:`~kernel_agent.sandbox.bwrap.bwrap_problem`), the worker
also runs in a bwrap of its own: ``/`` read-only, a fresh ``/tmp``, the service
directories masked, no network, its own pid and ipc namespaces; the interpreter, the
import path and the ``ro_paths`` it is given are bound in when the uid could not reach
them (a Python under ``/root``), a ``ro_path`` only when the uid may reach it on the host
(no private directory above it is opened by the bind). Without bwrap it runs through
``setpriv`` alone, and then the interpreter must be one every user may execute.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import KernelAgentError, SandboxError
from .mounts import PREMOUNTED
from .uids import drop_argv, leased_user

__all__ = ["run_module", "LIMITS"]

#: the size of the worker's /tmp (its home) under bwrap: all it may write
TMPFS_MB = 256
#: rlimits of a worker: (resource name, soft = hard value); CPU seconds come from the timeout
LIMITS: dict[str, int] = {
    "RLIMIT_AS": 6 << 30,
    "RLIMIT_FSIZE": 512 << 20,
    "RLIMIT_NOFILE": 256,
    "RLIMIT_NPROC": 64,
    "RLIMIT_CORE": 0,
}

_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

# runs as the worker's uid, before anything it is handed is read
_BOOT = (
    "import json,resource,sys,runpy\n"
    "for k,v in json.loads(sys.argv[1]).items():resource.setrlimit(getattr(resource,k),(v,v))\n"
    "sys.path[:0]=json.loads(sys.argv[2]);m=sys.argv[3];sys.argv=[m]+sys.argv[4:]\n"
    "runpy.run_module(m,run_name='__main__',alter_sys=True)\n"
)


def _everyone_may_run(path: Path) -> bool:
    """True when a uid in no group may execute ``path`` (every directory above it searchable)."""
    try:
        real = Path(os.path.realpath(path))
        mode = os.stat(real).st_mode
        if not stat.S_ISREG(mode) or not mode & stat.S_IXOTH:
            return False
        return all(os.stat(parent).st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


def _import_path() -> list[str]:
    """Where the worker imports from: our package's root, then the parent's path without
    its standard library (a system Python brings its own)."""
    ours = str(Path(__file__).resolve().parents[2])
    stdlib = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    out = [ours]
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if any(real == s or real.startswith(s + os.sep) for s in stdlib):
            continue
        if real == os.sep or Path(real) in PREMOUNTED:
            continue  # fresh in the worker's sandbox: a bind over one breaks its layout
        if real not in out:
            out.append(real)
    return out


def _env(home: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1",  # numpy's pool would reserve address space per core
        "OMP_NUM_THREADS": "1",
        "JUPYTER_PLATFORM_DIRS": "1",
    }


def run_module(
    module: str,
    args: list[str],
    payload: bytes,
    *,
    timeout: float = 300.0,
    max_output: int = 768 << 20,
    purpose: str = "a worker",
    env: dict[str, str] | None = None,
    ro_paths: tuple[str, ...] = (),
    error: type[KernelAgentError] = SandboxError,
    as_uid: int | None = None,
    pass_fds: tuple[int, ...] = (),
) -> bytes:
    """Run ``python -m module *args`` unprivileged with ``payload`` on stdin; its stdout.

    As root it runs as a leased uid; otherwise as ourselves (with the same bounds).
    ``error`` (one line) when it cannot start, exits non-zero, prints more than
    ``max_output`` bytes or takes longer than ``timeout`` seconds. ``env`` adds to the
    cleared environment (paths only: it is the parent's word, not a secret); ``ro_paths``
    are the directories the worker may read in (under the rules of the module docstring).
    ``as_uid`` (as root) runs it as that uid instead of a leased one (the owner of what it
    reads, such as a kernel's work dir; its other processes are not killed: they are not
    ours); ``pass_fds`` are handed to it under the same numbers.
    """
    limits = {**LIMITS, "RLIMIT_CPU": int(timeout) + 5}
    paths = _import_path()
    with _user(purpose, as_uid) as uid:
        home = Path(tempfile.mkdtemp(prefix="kernel-agent-worker-"))
        try:
            if uid >= 0:
                os.chown(home, uid, uid)
            prefix, inner = _confine(uid, home, paths, list(ro_paths), purpose, error)
            argv = [
                *prefix, *drop_argv(uid),
                sys.executable, "-I", "-c", _BOOT, json.dumps(limits), json.dumps(paths),
                module, *args,
            ]  # fmt: skip
            environ = {**_env(inner), **(env or {})}
            return _run(argv, payload, environ, home, timeout, max_output, purpose, error, pass_fds)
        except OSError as exc:
            raise error(f"{purpose} could not start: {exc}") from None
        finally:
            shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def _user(purpose: str, as_uid: int | None) -> Iterator[int]:
    """A leased uid, or ``as_uid`` when we are root and it is given (-1: ourselves)."""
    if as_uid is None or os.geteuid() != 0:
        with leased_user(purpose) as uid:
            yield uid
        return
    if as_uid <= 0:
        raise SandboxError(f"{purpose} would run as uid {as_uid}")
    yield as_uid


def _confine(
    uid: int,
    home: Path,
    ours: list[str],
    ro_paths: list[str],
    purpose: str,
    error: type[KernelAgentError],
) -> tuple[list[str], Path]:
    """The bwrap prefix and the worker's home inside it: a fresh directory on a bwrap
    tmpfs of :data:`TMPFS_MB` (so what it writes is bounded in all), or, without bwrap
    (or not root), no prefix and ``home``, where the interpreter must be one ``uid`` may run."""
    from .bwrap import ROOT_NAMESPACES, bwrap_problem, filesystem
    from .mounts import can_search, interpreter_paths

    problem, bwrap, _ = bwrap_problem() if uid >= 0 else ("not root", None, None)
    if problem is not None or bwrap is None:
        if uid >= 0 and not _everyone_may_run(Path(sys.executable)):
            raise error(
                f"{purpose} cannot run unprivileged: {sys.executable} is not an interpreter "
                f"every user may run, and bwrap, which would bind it in, does not work "
                f"({problem})"
            )
        return [], home
    ro = [*interpreter_paths(sys.executable), *map(Path, ours)]
    ro += [  # only what the uid could reach on the host anyway
        path
        for path in map(Path, ro_paths)
        if path.exists() and all(can_search(p, uid, set()) for p in path.parents)
    ]
    inner = Path("/tmp/work")
    prefix = [
        bwrap, *filesystem(ro, tmpfs_mb=TMPFS_MB), "--perms", "1777", "--dir", str(inner),
        "--chdir", str(inner), *ROOT_NAMESPACES, "--die-with-parent", "--",
    ]  # fmt: skip
    return prefix, inner


def _run(
    argv: list[str],
    payload: bytes,
    env: dict[str, str],
    home: Path,
    timeout: float,
    max_output: int,
    purpose: str,
    error: type[KernelAgentError],
    pass_fds: tuple[int, ...] = (),
) -> bytes:
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=home,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(OSError):  # fewer, larger reads of a large answer (an archive)
        fcntl.fcntl(proc.stdout.fileno(), _F_SETPIPE_SZ, 1 << 20)

    def feed() -> None:
        with contextlib.suppress(OSError):  # a worker that died early stops reading
            proc.stdin.write(payload)  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    out = bytearray()
    err = bytearray()
    deadline = time.monotonic() + timeout
    failure = ""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                failure = f"{purpose} took longer than {timeout:g} s"
                break
            for key, _ in sel.select(min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 20)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.data == "out":
                    out += chunk
                else:
                    err = (err + chunk)[-16384:]
            if len(out) > max_output:
                failure = f"{purpose} answered more than {max_output:,} bytes"
                break
    if failure:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)
    try:
        code = proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)
        code = proc.wait()
    writer.join(5)
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    if failure:
        raise error(failure)
    if code != 0:
        lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = lines[-1].strip()[:300] if lines else f"exit status {code}"
        raise error(f"{purpose} failed: {why}")
    return bytes(out)
