"""What a kernel wrote comes back to the user as content, never as configuration.

A sandboxed kernel writes only into its own work dir, which lives under a root-only
directory and goes away with the kernel; a gateway kernel's files are pulled into a private
staging dir first (:mod:`kernel_agent.remote.work`). :func:`deliver` is the one way any of
them comes beside the notebook, for all three paths (a local run's work dir, ``set_result``'s
files, a remote kernel's files):

- **everything** the kernel wrote goes into one archive, ``<notebook>_files/work.zip``
  (:mod:`kernel_agent.edges.archive`). No tool acts on a file inside a zip by itself: a bare
  git repository (``HEAD``, ``config`` with ``core.fsmonitor``, ``objects/``, ``refs/``),
  a ``conftest.py``, a ``pytest.ini``, an unchecked-hash ``__pycache__/*.pyc``, a ``.pth``,
  a package with ``__init__.py``: none of them is live there, whatever it is called;
- the files ``set_result(files=[...])`` **declared** also come back loose, in
  ``<notebook>_files/result/``, but only as inert data (:func:`loose_name`): flat (the
  basename only, so no directory layout, hence no repository, package or ``__pycache__``),
  a name that starts with a letter or digit (no dot file, no option-like ``-name``), and a
  suffix from :data:`DATA_SUFFIXES`: formats of tables, arrays, images, audio, video and
  documents that no tool reads as its own configuration or imports as code, whatever their
  stem. Any other declared file stays only in the archive, and a note says so.

As root, the walk and the reads of a work dir that a kernel's uid owns run as that uid in
an unprivileged worker (:mod:`kernel_agent.edges.packer`), and root checks the zip it sends
before writing its own: root opens no path in a kernel's work dir, and the loose files come
from the checked archive. A directory root made itself (a gateway kernel's staging dir, whose
files root wrote from the bytes it pulled) is read in-process, as is everything when we are
not root. Reads never follow a link (a planted link to ``/etc/shadow`` is left out), the archive's
members are regular files with mode 0644 (no setuid survives), and the count, each file and
the total are bounded. What is left out (dot names, depth, count, size, a refused name) is
said in the notes, never dropped silently. Dot-named paths stay out of the archive: hidden
tool state (caches, settings) the kernel made is noise, not results.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UnsafePath
from .archive import member_name, pack
from .packer import DeliveryLimits, _some, _walk_notes, owner_to_read_as, pack_as_owner
from .safefs import read_beneath, walk_beneath, write_beneath

__all__ = ["DATA_SUFFIXES", "Delivery", "DeliveryLimits", "deliver", "loose_name"]

ARCHIVE = "work.zip"
_LIMITS = DeliveryLimits()
LOOSE_DIR = "result"

#: Suffixes of a declared file that may come back loose. Data, media and documents: no tool
#: reads a file of these formats as its own configuration or instructions by a fixed name (as
#: git, pytest, tox, npm, deno, docker compose or maven read ``config``, ``*.ini``, ``*.cfg``,
#: ``*.toml``, ``*.json``, ``*.yml``, ``*.xml``; as cmake, pip and coding agents read
#: ``CMakeLists.txt``, ``requirements.txt``, ``AGENTS.md``: so no ``.txt`` or ``.md``
#: either), none is code or a container of code for the tool that opens it (no
#: ``.py``/``.pyc``/``.so``, no pickle, no macro-enabled office format), and Python imports
#: none of them (a test checks them against ``importlib.machinery.all_suffixes()``). A run's
#: structured result is ``set_result``'s ``data``, not a JSON file.
DATA_SUFFIXES = frozenset(
    {
        # tables and arrays
        "csv", "tsv", "dat", "log", "jsonl", "ndjson", "geojson",
        "parquet", "feather", "arrow", "npy", "npz", "h5", "hdf5", "nc", "xlsx",
        "sqlite", "db",
        # images
        "png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "svg",
        # documents
        "pdf", "html", "htm", "docx", "pptx", "rtf",
        # audio and video
        "wav", "mp3", "ogg", "flac", "mp4", "webm",
    }
)  # fmt: skip


def loose_name(rel: str) -> str | None:
    """The flat name declared file ``rel`` gets in ``result/``; None if it is not inert data."""
    base = rel.rsplit("/", 1)[-1]
    try:
        member_name(base, max_depth=1)
    except UnsafePath:
        return None
    stem, dot, suffix = base.rpartition(".")
    if not dot or not stem or not base[0].isalnum() or suffix.lower() not in DATA_SUFFIXES:
        return None
    return base


@dataclass
class Delivery:
    """What :func:`deliver` put beside the notebook."""

    #: ``<notebook>_files/work.zip`` when it holds the kernel's files, else None
    archive: Path | None = None
    #: the names inside it
    members: list[str] = field(default_factory=list)
    #: the declared files that came back loose, in ``<notebook>_files/result/``
    loose: list[Path] = field(default_factory=list)
    #: what was left out, and why (group notes first)
    notes: list[str] = field(default_factory=list)
    #: False when the archive was already there with the same members
    changed: bool = False

    def notice(self) -> str | None:
        """One line for the user: where the files are, and what was left out."""
        parts = []
        if self.archive is not None and self.changed:
            parts.append(
                f"{len(self.members)} file(s) the kernel wrote are in the archive {self.archive} "
                "(content: extract it as you would a download)"
            )
        if self.loose:
            parts.append(f"{len(self.loose)} declared data file(s) in {self.loose[0].parent}")
        if self.notes:
            parts.append(f"left out: {'; '.join(self.notes[:3])}")
        return "; ".join(parts) or None


def deliver(
    work: Path,
    notebook: Path,
    *,
    declared: Sequence[str] = (),
    archive: bool = True,
    limits: DeliveryLimits = _LIMITS,
) -> Delivery:
    """Bring the kernel's files from ``work`` beside ``notebook``: all of them in the archive
    (unless ``archive`` is False: an unsandboxed kernel wrote in the user's own dir), and the
    ``declared`` ones (paths relative to ``work``) that are inert data loose."""
    folder = f"{notebook.stem}_files"
    out = Delivery()
    owner = owner_to_read_as(work) if archive else None
    checked: zipfile.ZipFile | None = None
    if owner is not None:  # as root: read as the kernel, check what comes back
        dest = f"{folder}/{ARCHIVE}"
        packed, checked = pack_as_owner(work, owner, notebook.parent, dest, limits)
    elif archive:
        walk = walk_beneath(
            work, max_entries=limits.max_files * 10, max_depth=limits.max_depth, skip_dot=True
        )
        packed = pack(
            work, [e.path for e in walk.entries if e.kind == "file"],
            notebook.parent, f"{folder}/{ARCHIVE}",
            max_files=limits.max_files, max_file_bytes=limits.max_file_bytes,
            max_total_bytes=limits.max_total_bytes, max_depth=limits.max_depth,
        )  # fmt: skip
        packed.notes[:0] = _walk_notes(walk, limits)
    if archive:
        out.notes = packed.notes
        out.members, out.changed = packed.names, packed.changed
        if packed.names:
            out.archive = notebook.parent / folder / ARCHIVE
    try:
        kept = _loose(work, notebook.parent, folder, declared, out, limits, owner, checked)
    finally:
        if checked is not None:
            checked.close()
    if kept:
        where = ARCHIVE if out.archive is not None else "the kernel's work dir"
        out.notes.append(
            f"{len(kept)} declared file(s) are not plain data files and stay only in {where}: "
            + _some(kept)
        )
    return out


def _loose(
    work: Path,
    root: Path,
    folder: str,
    declared: Sequence[str],
    out: Delivery,
    limits: DeliveryLimits,
    owner: int | None,
    checked: zipfile.ZipFile | None,
) -> list[str]:
    """Copy the inert ``declared`` files loose into ``folder/result/`` (from the checked
    archive when the work dir was read as its owner: root opens no path in it); the rest."""
    inert: set[str] = set()
    kept: list[str] = []
    for rel in declared:
        flat = loose_name(rel)
        if flat is None or flat in inert:
            kept.append(rel)
            continue
        try:
            if owner is None:
                data = read_beneath(work, rel, limit=limits.max_file_bytes)
            else:
                data = _member(checked, rel, limits.max_file_bytes)
            target = root / folder / LOOSE_DIR / flat
            if not _same(target, data):
                write_beneath(root, f"{folder}/{LOOSE_DIR}/{flat}", data)
        except FileNotFoundError:
            out.notes.append(f"{rel}: not among the kernel's files")
            continue
        except (OSError, UnsafePath) as exc:
            out.notes.append(f"{rel}: {exc}")
            continue
        inert.add(flat)
        out.loose.append(target)
    return kept


def _member(checked: zipfile.ZipFile | None, rel: str, limit: int) -> bytes:
    """Member ``rel`` of the checked archive (FileNotFoundError when it is not there)."""
    try:
        info = None if checked is None else checked.getinfo(rel)
    except KeyError:
        info = None
    if checked is None or info is None:
        raise FileNotFoundError(rel)
    with checked.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnsafePath(f"{rel} is larger than {limit} bytes")
    return data


def _same(target: Path, data: bytes) -> bool:
    try:
        return (
            target.stat().st_size == len(data)
            and read_beneath(target.parent, target.name, limit=len(data)) == data
        )
    except (OSError, UnsafePath):
        return False
