"""A session's work dir as the front ends reach it: list, read, write, open, delete.

:class:`WorkDir` is the one small interface the file tools of
:class:`~kernel_agent.session.Session`, the HTTP service's file routes and the MCP server's
``list_files``/``read_file``/``write_file`` go through. Three implementations:

- :class:`LocalWorkDir`: a directory on this host (a local kernel's private work dir), through
  :mod:`kernel_agent.edges.safefs` (no link followed, atomic writes, bounded walks);
- :class:`RemoteWorkDir`: a remote kernel's own work dir (a gateway kernel), through the kernel's
  channels (:class:`~kernel_agent.remote.transfer.KernelFiles`): names are checked here before
  anything is asked for (:func:`~kernel_agent.remote.names.check_name`: no dot names, no
  ``..``, no control characters), every answer is bounded and checked, and a read lands in a
  private temp file on this host (size and sha256 compared) before a byte is handed on;
- :class:`ArchiveWorkDir`: an ended session's files, the members of the archive delivery
  wrote beside its notebook, read-only.

It lives beside ``session.py`` rather than in ``remote/`` or ``service/``: the session owns it,
both front ends use it, and the local half has nothing remote about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import zipfile
from collections.abc import AsyncIterable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .edges.archive import members_of
from .edges.safefs import (
    Entry,
    list_beneath,
    open_beneath,
    read_beneath,
    remove_beneath,
    write_stream_beneath,
)
from .errors import ConfigError, KernelAgentError, UnsafePath

if TYPE_CHECKING:
    from .remote.work import RemoteWork

__all__ = ["WorkDir", "LocalWorkDir", "RemoteWorkDir", "ArchiveWorkDir"]


class WorkDir(Protocol):
    """The file operations on a kernel's work dir (paths relative to it)."""

    #: True when the files are on this host (``path`` is their directory)
    local: bool

    async def list(self, max_entries: int = 500, max_depth: int = 4) -> list[Entry]: ...

    async def read(self, path: str, limit: int) -> bytes:
        """The bytes of regular file ``path``; :class:`ConfigError` past ``limit``."""
        ...

    async def write(self, path: str, chunks: AsyncIterable[bytes], mode: int = 0o644) -> int:
        """``path`` from ``chunks``, appearing only once all arrived; returns the size."""
        ...

    async def open(self, path: str) -> tuple[int, int]:
        """(fd, size) of a local copy of regular file ``path`` (the caller closes it)."""
        ...

    async def delete(self, path: str) -> None: ...

    async def usage(self) -> int:
        """Bytes in the work dir's regular files."""
        ...


def _missing(path: str) -> ConfigError:
    return ConfigError(f"no such file in the work dir: {path}")


class LocalWorkDir:
    """A work dir on this host. ``view`` is the user's directory the kernel's work dir
    links into (a read of such a link reads the user's file itself, never the link)."""

    local = True

    def __init__(self, root: Path, view: Path | None = None) -> None:
        self.root = root
        self.view = view

    async def list(self, max_entries: int = 500, max_depth: int = 4) -> list[Entry]:
        return list_beneath(self.root, max_entries=max_entries, max_depth=max_depth)

    async def read(self, path: str, limit: int) -> bytes:
        try:
            try:
                return read_beneath(self.root, path, limit=limit)
            except UnsafePath as exc:
                if "symlink" not in str(exc) or self.view is None or self.view == self.root:
                    raise
                # the work dir links the user's files: read those from the user's dir
                # itself (never through the link, which the kernel could have replaced)
                try:
                    return read_beneath(self.view, path, limit=limit)
                except FileNotFoundError:
                    raise exc from None  # a link the kernel made: not the user's file
        except FileNotFoundError:
            raise _missing(path) from None
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None
        except UnsafePath as exc:
            if "larger than" in str(exc):
                raise ConfigError(
                    f"{path} is larger than {limit // 1024} KB; read it from a cell instead"
                ) from None
            raise

    async def write(self, path: str, chunks: AsyncIterable[bytes], mode: int = 0o644) -> int:
        size = 0
        try:
            with write_stream_beneath(self.root, path, mode=mode) as fh:
                async for chunk in chunks:
                    fh.write(chunk)
                    size += len(chunk)
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None
        except NotADirectoryError:
            raise UnsafePath(f"{path}: a parent is not a directory") from None
        return size

    async def open(self, path: str) -> tuple[int, int]:
        try:
            fd = open_beneath(self.root, path)
        except (FileNotFoundError, NotADirectoryError):
            raise _missing(path) from None
        except IsADirectoryError:
            raise UnsafePath(f"{path} is a directory") from None
        return fd, os.fstat(fd).st_size

    async def delete(self, path: str) -> None:
        try:
            remove_beneath(self.root, path)
        except FileNotFoundError:
            raise _missing(path) from None
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None

    async def usage(self) -> int:
        def walk() -> int:
            entries = list_beneath(self.root, max_entries=100_000, max_depth=32)
            return sum(e.size for e in entries if e.kind == "file")

        return await asyncio.to_thread(walk)


class RemoteWorkDir:
    """A remote kernel's own work dir, through :class:`~kernel_agent.remote.work.RemoteWork`.

    ``lock`` is the session's: a file operation is a call into the kernel, so it waits
    for the running cell like any other request. ``max_open_bytes`` bounds a download.
    """

    local = False

    def __init__(
        self,
        work: RemoteWork,
        lock: Callable[[], contextlib.AbstractAsyncContextManager[object]],
        max_open_bytes: int | None = None,
    ) -> None:
        self.work = work
        self._lock = lock
        self.max_open_bytes = max_open_bytes or work.limits.max_file_bytes

    def _name(self, path: str) -> str:
        from .remote.names import check_name

        try:
            return check_name(path, max_depth=self.work.limits.max_depth)
        except UnsafePath as exc:
            raise UnsafePath(f"{path!r:.80}: not a name a remote work dir takes ({exc})") from None

    async def list(self, max_entries: int = 500, max_depth: int = 4) -> list[Entry]:
        """The kernel's entries whose names pass :func:`check_name` (others are left out:
        dot names, control characters, names that try to escape)."""
        from .remote.names import check_name

        async with self._lock():
            entries = await self.work.kernel.listing(max_entries, max_depth)
        out = []
        for e in entries:
            with contextlib.suppress(UnsafePath):
                out.append(Entry(check_name(e.path, max_depth=max_depth), e.kind, e.size))
        return out

    async def _stat(self, name: str) -> tuple[str, int, int]:
        found = await self.work.kernel.lstat(name)
        if found is None:
            raise _missing(name)
        if found[0] == "dir":
            raise ConfigError(f"{name} is a directory")
        if found[0] != "file":
            raise UnsafePath(f"{name} is a {'symlink' if found[0] == 'link' else found[0]}")
        return found

    async def _fetch(self, name: str, limit: int, too_big: str) -> tuple[int, int]:
        """(fd, size) of a private local copy of the kernel's ``name`` (already unlinked)."""
        async with self._lock():
            _, size, _ = await self._stat(name)
            if size > limit:
                raise ConfigError(too_big)
            with tempfile.TemporaryDirectory(prefix="kernel-agent-fetch-") as tmp:
                try:
                    await self.work.kernel.download(name, tmp, "file", size=size)
                except KernelAgentError as exc:
                    raise ConfigError(f"{name}: {exc}") from None
                fd = open_beneath(tmp, "file")
        return fd, size

    async def read(self, path: str, limit: int) -> bytes:
        name = self._name(path)
        fd, _ = await self._fetch(
            name, limit, f"{name} is larger than {limit // 1024} KB; read it from a cell instead"
        )
        with os.fdopen(fd, "rb") as fh:
            return fh.read(limit + 1)

    async def open(self, path: str) -> tuple[int, int]:
        name = self._name(path)
        bound = self.max_open_bytes
        return await self._fetch(name, bound, f"{name} is over the {bound} byte download bound")

    async def write(self, path: str, chunks: AsyncIterable[bytes], mode: int = 0o644) -> int:
        name = self._name(path)
        async with self._lock():
            found = await self.work.kernel.lstat(name)
            if found is not None and found[0] == "dir":
                raise ConfigError(f"{name} is a directory")
            size, _ = await self.work.kernel.upload_stream(chunks, name)
        return size

    async def delete(self, path: str) -> None:
        name = self._name(path)
        async with self._lock():
            found = await self.work.kernel.lstat(name)
            if found is None:
                raise _missing(name)
            if found[0] == "dir":
                raise ConfigError(f"{name} is a directory")
            await self.work.kernel.remove(name)

    async def usage(self) -> int:
        async with self._lock():
            return await self.work.kernel.usage(100_000)


class ArchiveWorkDir:
    """The files of an ended session: the members of the archive delivery wrote
    (:mod:`kernel_agent.edges.archive`), read-only. ``max_open_bytes`` bounds a download."""

    local = False

    def __init__(self, archive: Path, max_open_bytes: int = 50 * 1024 * 1024) -> None:
        self.archive = archive
        self.max_open_bytes = max_open_bytes

    @contextlib.contextmanager
    def _zip(self) -> Iterator[zipfile.ZipFile | None]:
        """The archive (no link followed), or None when there is none."""
        try:
            fd = open_beneath(self.archive.parent, self.archive.name)
        except (FileNotFoundError, UnsafePath):
            yield None
            return
        with os.fdopen(fd, "rb") as fh:
            try:
                archive = zipfile.ZipFile(fh)
            except zipfile.BadZipFile:
                raise ConfigError(f"{self.archive.name} is not a readable archive") from None
            with archive:
                yield archive

    def _infos(self) -> list[zipfile.ZipInfo]:
        with self._zip() as archive:
            return [] if archive is None else members_of(archive)

    async def list(self, max_entries: int = 500, max_depth: int = 4) -> list[Entry]:
        infos = [i for i in self._infos() if i.filename.count("/") < max_depth]
        return [Entry(i.filename, "file", i.file_size) for i in infos[:max_entries]]

    def _copy(self, path: str, limit: int, too_big: str) -> tuple[int, int]:
        """(fd, size) of a private copy of member ``path`` (already unlinked)."""
        with self._zip() as archive:
            if archive is None:
                raise _missing(path)
            info = next((i for i in members_of(archive) if i.filename == path), None)
            if info is None:
                if any(i.filename.startswith(path.rstrip("/") + "/") for i in archive.infolist()):
                    raise ConfigError(f"{path} is a directory")
                raise _missing(path)
            if info.file_size > limit:
                raise ConfigError(too_big)
            fd, name = tempfile.mkstemp(prefix="kernel-agent-member-")
            os.unlink(name)
            size = 0
            with archive.open(info) as src:
                while size <= limit and (block := src.read(1 << 20)):
                    os.write(fd, block)  # a regular file of ours: written whole
                    size += len(block)
            if size > limit:
                os.close(fd)
                raise ConfigError(too_big)
            os.lseek(fd, 0, os.SEEK_SET)
        return fd, size

    async def read(self, path: str, limit: int) -> bytes:
        too_big = f"{path} is larger than {limit // 1024} KB; read it from a cell instead"
        fd, _ = await asyncio.to_thread(self._copy, path, limit, too_big)
        with os.fdopen(fd, "rb") as fh:
            return fh.read(limit + 1)

    async def open(self, path: str) -> tuple[int, int]:
        bound = self.max_open_bytes
        too_big = f"{path} is over the {bound} byte download bound"
        return await asyncio.to_thread(self._copy, path, bound, too_big)

    async def write(self, path: str, chunks: AsyncIterable[bytes], mode: int = 0o644) -> int:
        raise ConfigError("the session has ended: its files are read-only")

    async def delete(self, path: str) -> None:
        raise ConfigError("the session has ended: its files are read-only")

    async def usage(self) -> int:
        return sum(i.file_size for i in self._infos())
