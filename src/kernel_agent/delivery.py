"""Files the kernel wrote come back to the user by explicit delivery, never by a shared dir.

A sandboxed kernel writes only into its own work dir, which lives under a root-only
directory and goes away with the kernel. After each run the host copies the regular
files the kernel made there (not the links to the user's files, not links at all)
into ``<notebook>_files/work/``, reading them with no-follow semantics and writing
them with a plain mode: no setuid bit, no planted link, no file larger than the
bound, and at most so many of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .safefs import UnsafePath, copy_out, list_beneath, read_beneath

__all__ = ["DeliveryLimits", "deliver_work_files"]


@dataclass(frozen=True)
class DeliveryLimits:
    max_files: int = 100
    max_file_bytes: int = 50 * 1024 * 1024
    max_total_bytes: int = 200 * 1024 * 1024


def deliver_work_files(
    work: Path, notebook: Path, limits: DeliveryLimits = DeliveryLimits()
) -> tuple[list[Path], list[str]]:
    """Copy the kernel's own files from ``work`` beside ``notebook``.

    Returns ``(delivered paths, notes on what was left out)``. Files whose content
    is already delivered unchanged are not copied again.
    """
    dest_parent = notebook.parent
    folder = f"{notebook.stem}_files/work"
    delivered: list[Path] = []
    skipped: list[str] = []
    total = 0
    for entry in list_beneath(work, max_entries=limits.max_files * 10):
        if entry.kind != "file" or entry.path.split("/")[0].startswith("."):
            continue
        if len(delivered) >= limits.max_files:
            skipped.append(f"more than {limits.max_files} files")
            break
        if entry.size > limits.max_file_bytes or total + entry.size > limits.max_total_bytes:
            skipped.append(f"{entry.path} ({entry.size} bytes) is over the size bound")
            continue
        target = dest_parent / folder / entry.path
        try:
            if target.is_file() and not target.is_symlink() and target.stat().st_size == entry.size:
                if target.read_bytes() == read_beneath(work, entry.path, limit=entry.size):
                    continue
            total += copy_out(work, entry.path, dest_parent, f"{folder}/{entry.path}",
                              limit=limits.max_file_bytes)  # fmt: skip
        except (OSError, UnsafePath) as exc:
            skipped.append(f"{entry.path}: {exc}")
            continue
        delivered.append(target)
    return delivered, skipped
