"""Isolation for kernels: the bubblewrap launcher, its rooms, uids, bounds and environment.

:func:`make_launcher` is the entry point; see :mod:`.launcher` for what a
sandboxed kernel gets.
"""

from .launcher import (
    BwrapLauncher,
    KernelLauncher,
    SandboxStatus,
    bwrap_problem,
    find_bwrap,
    make_launcher,
)

__all__ = [
    "BwrapLauncher",
    "KernelLauncher",
    "SandboxStatus",
    "bwrap_problem",
    "find_bwrap",
    "make_launcher",
]
