"""Tests that cross into a sandbox or another uid: where their files may live.

A sandboxed kernel sees only what :mod:`kernel_agent.sandbox.mounts` binds in; code run
as another uid sees only what that uid may search. So a test never points another
process into this checkout (which may be a clone under ``/tmp``, or under a 0700 home):

- :data:`SRC` is this checkout's ``src``, defined once, for subprocesses of *our* uid
  on the host;
- :func:`package_for_others` copies ``kernel_agent`` into a directory another uid can
  read, and :func:`sandbox_argv` builds a bwrap command line from the package's own
  :func:`~kernel_agent.sandbox.bwrap.filesystem` (the system, this Python, the paths given);
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


def package_for_others(dest: Path) -> Path:
    """A copy of this checkout's ``kernel_agent`` under ``dest`` that any uid may read;
    the directory to put on ``PYTHONPATH`` (and to bind into a sandbox)."""
    site = dest / "site"
    shutil.copytree(
        SRC / "kernel_agent", site / "kernel_agent", ignore=shutil.ignore_patterns("__pycache__")
    )
    for folder, _dirs, files in os.walk(site):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return site


def sandbox_argv(
    bwrap: str, ro_paths: Sequence[Path] = (), rw_paths: Sequence[Path] = ()
) -> list[str]:
    """``bwrap`` with the filesystem a kernel gets (see ``sandbox/mounts.py``) plus
    ``ro_paths`` and ``rw_paths``, up to (not including) the namespaces and ``--``."""
    from kernel_agent.sandbox.bwrap import filesystem

    return [bwrap, *filesystem(list(ro_paths), list(rw_paths), tmpfs_mb=64)]


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
