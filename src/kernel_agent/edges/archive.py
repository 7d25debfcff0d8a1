"""One zip archive of a kernel's files, written by the host: content, not a tree.

What a kernel wrote comes back inside one ``.zip`` beside the notebook
(:func:`kernel_agent.edges.delivery.deliver`), never as live files: a bare git repository,
a ``conftest.py`` or a ``__pycache__`` is inert as a member of an archive, since no tool
(git, pytest, Python's import system, direnv) looks inside a zip it was not pointed at.

The archive is the host's own: every member name is checked here (:func:`member_name`:
relative, no ``..``, no backslash, no control, format or non-UTF-8 characters, bounded),
every member is a regular file with mode 0644 (no link, directory, device or setuid bit is
ever recorded), the bytes are read with no link followed and at most the size seen when the
file was opened, and the count and bytes are bounded by the caller. So ``unzip`` or
``zipfile.extractall`` of it writes only beneath the directory it is extracted into.
Members are stored, not compressed: deflating 80 MB of CSV at level 1 made delivery 17 times
slower than a raw copy (``bench/bench_delivery.py``); storing costs a CRC-32 on top of it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO

from ..errors import UnsafePath
from .safefs import open_beneath, open_dir_beneath, split_relative

__all__ = [
    "Opener",
    "Packed",
    "checked_members",
    "fill",
    "member_name",
    "members_of",
    "pack",
    "zip_opener",
]

MAX_NAME_CHARS = 1024
MAX_COMPONENT_BYTES = 255
_BLOCK = 1 << 20
#: Unicode categories refused in a name: controls, format (bidi overrides, zero-width),
#: surrogates (bytes that are not UTF-8), line and paragraph separators
_REFUSED = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_EPOCH_1980 = 315532800  # the earliest time a zip entry can hold

#: opens member ``rel`` of a source: (file, size, mtime), or why it cannot be had
Opener = Callable[[object, str], "tuple[IO[bytes], int, float] | str"]


def member_name(rel: object, *, max_depth: int = 8) -> str:
    """``rel`` as a safe member name (relative POSIX path); :class:`UnsafePath` otherwise."""
    if not isinstance(rel, str):
        raise UnsafePath(f"not a file name: {rel!r:.80}")
    if len(rel) > MAX_NAME_CHARS:
        raise UnsafePath(f"a name of {len(rel)} characters: {rel[:40]!r}...")
    bad = next((c for c in rel if unicodedata.category(c) in _REFUSED), None)
    if bad is not None:
        raise UnsafePath(f"a control or non-UTF-8 character (U+{ord(bad):04X}) in {rel!r:.80}")
    if "\\" in rel:  # a separator to some extractors: '..\\..\\x' would climb out there
        raise UnsafePath(f"a backslash in {rel!r:.80}")
    parts = split_relative(rel)
    if "/".join(parts) != rel:
        raise UnsafePath(f"not in normal form: {rel!r:.80}")
    if len(parts) > max_depth:
        raise UnsafePath(f"deeper than {max_depth} directories: {rel!r:.80}")
    for part in parts:
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePath(f"a component over {MAX_COMPONENT_BYTES} bytes in {rel!r:.80}")
    return rel


@dataclass
class Packed:
    """What :func:`pack` put in the archive, and what it left out (with why)."""

    #: member names, in the order written
    names: list[str] = field(default_factory=list)
    #: bytes of the members (uncompressed)
    size: int = 0
    #: one line per file left out
    notes: list[str] = field(default_factory=list)
    #: False when nothing was packed, or an archive with the same members (names, sizes,
    #: CRCs) was already there (it is kept as it was)
    changed: bool = False


def pack(
    src_root: object,
    names: Iterable[str],
    dest_root: str | os.PathLike[str] | int,
    dest_rel: str,
    *,
    max_files: int,
    max_file_bytes: int,
    max_total_bytes: int,
    max_depth: int = 8,
    opener: Opener | None = None,
) -> Packed:
    """Write the regular files ``src_root/name`` for ``names`` into the zip ``dest_root/dest_rel``.

    Atomic (a temp file beside the target, renamed into place through the directory's fd: a
    link at the target is replaced, never followed; an equal archive is left as it was).
    A name that fails :func:`member_name`, a link, a non-regular file or one over the bounds is
    left out with a note. With nothing to pack, nothing is written. ``opener`` reads the
    members from elsewhere than files beneath ``src_root`` (:func:`zip_opener`).
    """
    out = Packed()
    wanted: list[str] = []
    for rel in names:
        try:
            wanted.append(member_name(rel, max_depth=max_depth))
        except UnsafePath as exc:
            out.notes.append(f"refused a name: {exc}")
    if not wanted:
        return out
    previous = _signature(dest_root, dest_rel)
    parts = split_relative(dest_rel)
    with open_dir_beneath(dest_root, parts[:-1], create=True) as dir_fd:
        tmp = f".{parts[-1]}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o644)  # exact mode, whatever the umask
            with os.fdopen(fd, "wb") as fh:
                written = fill(fh, src_root, wanted, out, max_files=max_files,
                               max_file_bytes=max_file_bytes, max_total_bytes=max_total_bytes,
                               opener=opener)  # fmt: skip
            # nothing came in, or the same members as the archive in place: keep that one
            out.changed = bool(out.names) and written != previous
            if out.changed:  # through the directory fd: a link planted there is replaced
                os.rename(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
    return out


def fill(
    fh: IO[bytes],
    src_root: object,
    wanted: list[str],
    out: Packed,
    *,
    max_files: int,
    max_file_bytes: int,
    max_total_bytes: int,
    opener: Opener | None = None,
    comment: Callable[[Packed], bytes] | None = None,
) -> list[tuple[str, int, int]]:
    """Write the members ``wanted`` (checked names) as a zip into ``fh`` (which need not be
    seekable), noting in ``out``; the (name, size, CRC) of what was written. ``comment``
    makes the archive's comment from ``out`` once the members are in."""
    with zipfile.ZipFile(fh, "w", allowZip64=True) as zf:
        for rel in wanted:
            if len(out.names) >= max_files:
                out.notes.insert(0, f"more than {max_files} files")
                break
            opened = (opener or _open_file)(src_root, rel)
            why = _add(zf, opened, rel, max_file_bytes, max_total_bytes - out.size)
            if isinstance(why, str):
                out.notes.append(why)
                continue
            out.names.append(rel)
            out.size += why
        if comment is not None:
            zf.comment = comment(out)
        return _info(zf)


def _open_file(root: object, rel: str) -> tuple[IO[bytes], int, float] | str:
    """``root/rel`` opened with no link followed: (file, size at open, mtime), or why not."""
    try:
        fd = open_beneath(root, rel)  # type: ignore[arg-type]
    except (OSError, UnsafePath) as exc:
        return f"{rel}: {exc.strerror if isinstance(exc, OSError) else exc}"
    st = os.fstat(fd)
    return os.fdopen(fd, "rb"), st.st_size, st.st_mtime


def zip_opener(zf: zipfile.ZipFile) -> Opener:
    """An opener of the members of ``zf`` (an archive :func:`checked_members` accepted)."""

    def opener(_root: object, rel: str) -> tuple[IO[bytes], int, float] | str:
        try:
            info = zf.getinfo(rel)
        except KeyError:
            return f"{rel}: not in the archive"
        mtime = time.mktime((*info.date_time, 0, 0, -1))
        return zf.open(info), info.file_size, mtime

    return opener


def _add(zf: zipfile.ZipFile, opened: tuple[IO[bytes], int, float] | str, rel: str,
         max_bytes: int, room: int) -> int | str:  # fmt: skip
    """Add ``opened`` as member ``rel``; its size, or why it was left out."""
    if isinstance(opened, str):
        return opened
    src, size, mtime = opened
    with src:
        # read no more than ``size``, however the file grows meanwhile
        if size > max_bytes or size > room:
            return f"{rel} ({size} bytes) is over the size bound"
        info = zipfile.ZipInfo(rel, time.localtime(max(mtime, _EPOCH_1980))[:6])
        info.create_system = 3  # Unix: the mode below is read by extractors
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        info.compress_type = zipfile.ZIP_STORED  # a copy, not an archiver (bench_delivery.py)
        first = src.read(min(size, _BLOCK))
        copied = len(first)
        with zf.open(info, "w", force_zip64=size >= 1 << 31) as dst:
            dst.write(first)
            while copied < size and (block := src.read(min(_BLOCK, size - copied))):
                dst.write(block)
                copied += len(block)
    return copied


def _info(zf: zipfile.ZipFile) -> list[tuple[str, int, int]]:
    return [(i.filename, i.file_size, i.CRC) for i in zf.infolist()]


def _signature(root: str | os.PathLike[str] | int, rel: str) -> list[tuple[str, int, int]] | None:
    """The members of the archive already at ``root/rel`` (None if there is none to read)."""
    try:
        fd = open_beneath(root, rel)
    except (OSError, UnsafePath):
        return None
    try:
        with os.fdopen(fd, "rb") as fh, zipfile.ZipFile(fh) as zf:
            return _info(zf)
    except (OSError, zipfile.BadZipFile, ValueError):
        return None


def checked_members(
    zf: zipfile.ZipFile, data_size: int, *, max_files: int, max_file_bytes: int,
    max_total_bytes: int, max_depth: int = 8,
) -> list[str]:  # fmt: skip
    """The member names of an archive someone else wrote (the unprivileged packer), when it
    is one :func:`pack` could have written: at most ``max_files`` members with names
    :func:`member_name` accepts, each once, each a regular file stored uncompressed and
    unencrypted (so no ratio to bomb with: its size is the bytes it holds), within the size
    bounds and within the ``data_size`` bytes the archive has. :class:`UnsafePath` naming the
    first thing that is not so: the whole archive is refused."""
    infos = zf.infolist()
    if len(infos) > max_files:
        raise UnsafePath(f"{len(infos)} members, more than {max_files}")
    names: list[str] = []
    total = 0
    for info in infos:
        name = member_name(info.filename, max_depth=max_depth)
        mode = info.external_attr >> 16
        if name in names:
            raise UnsafePath(f"{name!r:.80} twice")
        if info.is_dir() or not stat.S_ISREG(mode) or stat.S_IMODE(mode) != 0o644:
            raise UnsafePath(f"{name!r:.80} is not a regular 0644 file (mode {mode:o})")
        if info.flag_bits & 0x1 or info.compress_type != zipfile.ZIP_STORED:
            raise UnsafePath(f"{name!r:.80} is compressed or encrypted")
        if info.compress_size != info.file_size or info.file_size > max_file_bytes:
            raise UnsafePath(f"{name!r:.80} declares {info.file_size} bytes")
        total += info.file_size
        if total > max_total_bytes or total > data_size:
            raise UnsafePath(f"members of more than {min(max_total_bytes, data_size)} bytes")
        names.append(name)
    return names


def members_of(zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The regular-file members of an archive :func:`pack` wrote, with safe names (others,
    which :func:`pack` never writes, are not listed)."""
    out = []
    for info in zf.infolist():
        try:
            member_name(info.filename, max_depth=64)
        except UnsafePath:
            continue
        if not info.is_dir():
            out.append(info)
    return out
