"""Tests that cross into a sandbox or another uid: where their files may live.

A sandboxed kernel sees only what :mod:`kernel_agent.sandbox.mounts` binds in; code run
as another uid sees only what that uid may search. So a test never points another
process into this checkout (which may be a clone under ``/tmp``, or under a 0700 home):

- :data:`SRC` is this checkout's ``src``, defined once, for subprocesses of *our* uid
  on the host (:func:`host_pythonpath`);
- :func:`package_for_others` copies ``kernel_agent`` into a directory another uid can
  read, and :func:`sandbox_argv` builds a bwrap command line from the package's own
  :func:`~kernel_agent.sandbox.bwrap.filesystem` (the system and the paths given);
- :func:`planted_dirs` makes fresh world-readable directories in several places of the
  host, each holding a marker file, that the kernel's sandbox must not show.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

#: this checkout's sources (for subprocesses that run as us, on the host)
SRC = Path(__file__).resolve().parents[1] / "src"
#: the directory holding this checkout
CHECKOUT_PARENT = SRC.parents[1]


@contextlib.contextmanager
def package_for_others() -> Iterator[Path]:
    """A copy of this checkout's ``kernel_agent`` that any uid may reach and read, in a
    fresh 0755 directory of the shared temp dir (this checkout may sit under a 0700
    home, or under ``/tmp``, which a sandbox replaces): the directory to put on
    ``PYTHONPATH`` and to bind into a sandbox. Removed afterwards."""
    from kernel_agent.sandbox.mounts import can_search

    folder = Path(tempfile.mkdtemp(prefix="ka-test-site-", dir="/tmp"))
    try:
        site = folder / "site"
        shutil.copytree(
            SRC / "kernel_agent",
            site / "kernel_agent",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        for path, _dirs, files in os.walk(folder):
            os.chmod(path, 0o755)
            for name in files:
                os.chmod(os.path.join(path, name), 0o644)
        if not all(can_search(d, 65534, set()) for d in (site, *site.parents)):
            raise RuntimeError(f"{site} is not reachable by other uids on this host")
        yield site
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sandbox_argv(bwrap: str, ro_paths: Sequence[Path] = ()) -> list[str]:
    """``bwrap`` with the filesystem a kernel gets (the system, see ``sandbox/mounts.py``)
    plus ``ro_paths``, not this Python environment (another uid may not reach it); up to,
    not including, the namespaces and ``--``."""
    from kernel_agent.sandbox.bwrap import filesystem

    return [bwrap, *filesystem(list(ro_paths), tmpfs_mb=64, python=False)]


def host_pythonpath() -> str:
    """``PYTHONPATH`` for a subprocess of our uid on the host: this checkout's sources first."""
    return os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)


#: where :func:`planted_dirs` tries to make a directory: the shared temp dir, the
#: checkout's parent (other projects live there), and the usual system places
PLANT_PARENTS = ("/var/tmp", "/opt", "/srv", "/home", str(CHECKOUT_PARENT), "/tmp")


@contextlib.contextmanager
def planted_dirs(marker: str) -> Iterator[list[Path]]:
    """Fresh 0755 directories under each of :data:`PLANT_PARENTS` that exists and is
    writable here, each with a 0644 ``planted.txt`` holding ``marker``: files any uid
    could read on the host. Removed afterwards."""
    made: list[Path] = []
    try:
        for parent in PLANT_PARENTS:
            if not (os.path.isdir(parent) and os.access(parent, os.W_OK)):
                continue
            folder = Path(tempfile.mkdtemp(prefix="planted-", dir=parent))
            made.append(folder)
            folder.chmod(0o755)
            (folder / "planted.txt").write_text(marker)
            (folder / "planted.txt").chmod(0o644)
        yield made
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
