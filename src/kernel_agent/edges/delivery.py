"""Files the kernel wrote come back to the user by explicit delivery, never by a shared dir.

A sandboxed kernel writes only into its own work dir, which lives under a root-only
directory and goes away with the kernel. After each run the host copies the regular
files the kernel made there (not the links to the user's files, not links at all)
into ``<notebook>_files/work/``, reading them with no-follow semantics and writing
them with a plain mode: no setuid bit, no planted link, no file larger than the
bound, and at most so many of them.

What comes back is content, never configuration: nothing under a name that starts
with ``.`` at any depth (a delivered ``report/.git/config`` with ``core.fsmonitor``
would run the kernel's command as whoever next runs ``git status`` there, root
included). What is left out, for a dot name, for depth, for count or for size, is
said in the notes, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UnsafePath
from .safefs import Walk, copy_out, read_beneath, walk_beneath

__all__ = ["DeliveryLimits", "deliver_work_files"]


@dataclass(frozen=True)
class DeliveryLimits:
    max_files: int = 100
    max_file_bytes: int = 50 * 1024 * 1024
    max_total_bytes: int = 200 * 1024 * 1024
    max_depth: int = 8


def deliver_work_files(
    work: Path, notebook: Path, limits: DeliveryLimits = DeliveryLimits()
) -> tuple[list[Path], list[str]]:
    """Copy the kernel's own files from ``work`` beside ``notebook``.

    Returns ``(delivered paths, notes on what was left out)``; the notes on whole
    groups (dot names, depth, count) come first. Files whose content is already
    delivered unchanged are not copied again.
    """
    dest_parent = notebook.parent
    folder = f"{notebook.stem}_files/work"
    walk = walk_beneath(
        work, max_entries=limits.max_files * 10, max_depth=limits.max_depth, skip_dot=True
    )
    delivered: list[Path] = []
    skipped = _walk_notes(walk, limits)
    total = 0
    for entry in walk.entries:
        if entry.kind != "file":
            continue
        if len(delivered) >= limits.max_files:
            skipped.insert(0, f"more than {limits.max_files} files")
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


def _walk_notes(walk: Walk, limits: DeliveryLimits) -> list[str]:
    notes = []
    if walk.dot_count:
        notes.append(
            f"{walk.dot_count} dot-named path(s), configuration rather than content: "
            + _some(walk.dot_names, walk.dot_count)
        )
    if walk.too_deep:
        notes.append(f"what is below {limits.max_depth} directory levels: " + _some(walk.too_deep))
    if walk.truncated:
        notes.append(f"everything past the first {limits.max_files * 10} entries")
    return notes


def _some(names: list[str], count: int | None = None, shown: int = 3) -> str:
    count = len(names) if count is None else count
    text = ", ".join(names[:shown])
    return text + (f" and {count - shown} more" if count > shown else "")
