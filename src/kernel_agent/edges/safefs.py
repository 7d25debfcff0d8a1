"""File operations that never follow a path a kernel could have planted.

The host (often root) reads and writes files in directories that a kernel can also
write: the kernel's work dir, and, unsandboxed, the user's. A symlink planted there
must not redirect a host write (root overwriting ``/etc/cron.d/x``) or a host read
(a "result file" that is really ``/etc/shadow``). Every function here starts from a
directory the caller trusts (``root``) and walks the rest of the path one component
at a time with ``openat`` and ``O_NOFOLLOW``: a symlink anywhere below ``root`` makes
the call fail with :class:`UnsafePath`. Relative paths only; ``..`` and absolute
paths are refused before anything is opened.

Writes are atomic (a temp file in the target's directory, then ``rename`` through
the directory fds), so a link planted at the target is replaced, never followed, and
a reader never sees half a file. Modes are set explicitly, never copied with
``stat()`` from something a kernel controls.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..errors import UnsafePath

__all__ = [
    "Entry",
    "split_relative",
    "open_dir_beneath",
    "write_beneath",
    "read_beneath",
    "list_beneath",
    "walk_beneath",
    "Walk",
    "dot_component",
    "copy_out",
    "file_mode",
    "open_beneath",
    "write_stream_beneath",
    "remove_beneath",
]

_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def split_relative(rel: str | os.PathLike[str]) -> list[str]:
    """The components of a relative path, or :class:`UnsafePath` for one that could escape."""
    text = os.fspath(rel)
    if not text or "\x00" in text:
        raise UnsafePath(f"not a usable file name: {text!r}")
    path = PurePosixPath(text)
    if path.is_absolute():
        raise UnsafePath(f"absolute paths are not allowed: {text}")
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts:
        raise UnsafePath(f"not a file name: {text!r}")
    if ".." in parts:
        raise UnsafePath(f"paths with '..' are not allowed: {text}")
    return parts


def dot_component(rel: str | os.PathLike[str]) -> str | None:
    """The first component of ``rel`` that starts with ``.`` (``.git``, ``.envrc``), or None.

    Such names are configuration, not content: a ``.git/config`` with ``core.fsmonitor``
    runs its command as whoever next runs ``git status`` in the directory.
    """
    return next((p for p in split_relative(rel) if p.startswith(".")), None)


def _open_root(root: str | os.PathLike[str] | int) -> tuple[int, bool]:
    """(fd, owned): a directory fd for ``root`` (the caller trusts this path)."""
    if isinstance(root, int):
        return root, False
    return os.open(os.fspath(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), True


def _step(dir_fd: int, name: str, *, create: bool, rel: str) -> int:
    """Open directory ``name`` inside ``dir_fd`` without following links (mkdir if asked)."""
    try:
        return os.open(name, _NOFOLLOW_DIR, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
        except FileExistsError:
            pass
        return _step(dir_fd, name, create=False, rel=rel)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(f"{rel}: {name} is a symlink or not a directory") from None
        raise


@contextmanager
def open_dir_beneath(
    root: str | os.PathLike[str] | int, parts: list[str], *, create: bool = False
) -> Iterator[int]:
    """A directory fd for ``root/parts...``, reached without following any link."""
    fd, owned = _open_root(root)
    rel = "/".join(parts)
    try:
        for name in parts:
            nxt = _step(fd, name, create=create, rel=rel)
            if owned:
                os.close(fd)
            fd, owned = nxt, True
        yield fd
    finally:
        if owned:
            os.close(fd)


def write_beneath(
    root: str | os.PathLike[str] | int,
    rel: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int = 0o644,
    makedirs: bool = True,
) -> None:
    """Write ``data`` to ``root/rel`` atomically; a link at the target is replaced."""
    with write_stream_beneath(root, rel, mode=mode, makedirs=makedirs) as fh:
        fh.write(data)


@contextmanager
def write_stream_beneath(
    root: str | os.PathLike[str] | int,
    rel: str | os.PathLike[str],
    *,
    mode: int = 0o644,
    makedirs: bool = True,
) -> Iterator[BinaryIO]:
    """A binary file to write ``root/rel`` through, moved into place only if the block succeeds.

    The bytes go to a temp file beside the target; an exception leaves the target as it was.
    """
    parts = split_relative(rel)
    with open_dir_beneath(root, parts[:-1], create=makedirs) as dir_fd:
        tmp = f".{parts[-1]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode, dir_fd=dir_fd,
        )  # fmt: skip
        try:
            os.fchmod(fd, mode)  # exact mode, whatever the umask
            with os.fdopen(fd, "wb", closefd=True) as fh:
                yield fh
            os.rename(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise


def remove_beneath(root: str | os.PathLike[str] | int, rel: str | os.PathLike[str]) -> None:
    """Remove the file (or link: the link itself) ``root/rel``; directories are refused."""
    parts = split_relative(rel)
    with open_dir_beneath(root, parts[:-1]) as dir_fd:
        st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(rel))
        os.unlink(parts[-1], dir_fd=dir_fd)


def open_beneath(root: str | os.PathLike[str] | int, rel: str | os.PathLike[str]) -> int:
    """A read-only fd of regular file ``root/rel`` (the caller closes it)."""
    return _open_file(root, rel)


def _open_file(root: str | os.PathLike[str] | int, rel: str | os.PathLike[str]) -> int:
    parts = split_relative(rel)
    with open_dir_beneath(root, parts[:-1]) as dir_fd:
        try:
            fd = os.open(
                parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(f"{os.fspath(rel)} is a symlink") from None
            raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{os.fspath(rel)} is not a regular file")
    return fd


def read_beneath(
    root: str | os.PathLike[str] | int, rel: str | os.PathLike[str], *, limit: int
) -> bytes:
    """The bytes of regular file ``root/rel``; :class:`UnsafePath` past ``limit`` bytes."""
    fd = _open_file(root, rel)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnsafePath(f"{os.fspath(rel)} is larger than {limit} bytes")
    return data


@dataclass(frozen=True)
class Entry:
    """One directory entry, as ``lstat`` sees it (links are reported, not followed)."""

    path: str
    kind: str  # "file", "dir", "link" or "other"
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


@dataclass
class Walk:
    """What :func:`walk_beneath` saw: the entries, and what it did not look into."""

    entries: list[Entry] = field(default_factory=list)
    #: how many dot-named entries (files or directories) ``skip_dot`` left out ...
    dot_count: int = 0
    #: ... and the first few of them
    dot_names: list[str] = field(default_factory=list)
    #: non-empty directories at ``max_depth`` whose contents were not listed
    too_deep: list[str] = field(default_factory=list)
    #: ``max_entries`` was reached before the whole tree was seen
    truncated: bool = False


_NAMES_KEPT = 20  # dot names a Walk keeps (it counts them all)


def walk_beneath(
    root: str | os.PathLike[str] | int,
    *,
    max_entries: int = 1000,
    max_depth: int = 4,
    skip_dot: bool = False,
) -> Walk:
    """Entries below ``root`` (breadth first, links not entered), at most ``max_entries``.

    ``skip_dot`` leaves out every entry whose name starts with ``.`` (and all below it),
    counted in :attr:`Walk.dot_count` and named in :attr:`Walk.dot_names` (but links: a
    work dir links the user's own ``.git`` or ``.env``, which is no news); directories at
    ``max_depth`` that hold something are named in :attr:`Walk.too_deep`. Nothing is left
    out silently.
    """
    walk = Walk()
    queue: list[list[str]] = [[]]
    while queue and not walk.truncated:
        parts = queue.pop(0)
        try:
            with open_dir_beneath(root, parts) as dir_fd:
                for name in sorted(os.listdir(dir_fd)):
                    rel = "/".join([*parts, name])
                    if len(walk.entries) >= max_entries:  # one more than the bound: say so
                        walk.truncated = True
                        break
                    try:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except OSError:
                        continue
                    kind = _kind(st.st_mode)
                    if skip_dot and name.startswith("."):
                        if kind != "link":  # links (the user's own files) are not listed
                            walk.dot_count += 1
                            if len(walk.dot_names) < _NAMES_KEPT:
                                walk.dot_names.append(rel)
                        continue
                    walk.entries.append(Entry(rel, kind, st.st_size))
                    if kind != "dir":
                        continue
                    if len(parts) + 1 < max_depth:
                        queue.append([*parts, name])
                    elif _has_entries(dir_fd, name):
                        walk.too_deep.append(rel)
        except (OSError, UnsafePath):
            continue
    return walk


def _has_entries(dir_fd: int, name: str) -> bool:
    try:
        fd = os.open(name, _NOFOLLOW_DIR, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        with os.scandir(fd) as it:
            return next(it, None) is not None
    except OSError:
        return False
    finally:
        os.close(fd)


def list_beneath(
    root: str | os.PathLike[str] | int, *, max_entries: int = 1000, max_depth: int = 4
) -> list[Entry]:
    """Entries below ``root`` (breadth first, links not entered), at most ``max_entries``."""
    return walk_beneath(root, max_entries=max_entries, max_depth=max_depth).entries


def copy_out(
    src_root: str | os.PathLike[str] | int,
    rel: str | os.PathLike[str],
    dest_root: str | os.PathLike[str] | int,
    dest_rel: str | os.PathLike[str] | None = None,
    *,
    limit: int,
    mode: int = 0o644,
) -> int:
    """Copy regular file ``src_root/rel`` to ``dest_root/dest_rel``; returns its size.

    Neither side follows links; the copy gets ``mode`` (no setuid bit survives). What
    leaves a kernel's dir is content, never configuration: :class:`UnsafePath` for a
    ``rel`` with a component that starts with ``.`` (see :func:`dot_component`).
    """
    dot = dot_component(rel)
    if dot is not None:
        raise UnsafePath(f"{os.fspath(rel)}: {dot} is a dot name (configuration, not content)")
    data = read_beneath(src_root, rel, limit=limit)
    write_beneath(dest_root, dest_rel if dest_rel is not None else rel, data, mode=mode)
    return len(data)


def file_mode(path: Path) -> int | None:
    """The permission bits of ``path`` itself (``lstat``), without setuid/setgid/sticky."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return stat.S_IMODE(st.st_mode) & 0o777
