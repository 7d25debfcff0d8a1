"""Moving file bytes to and from a kernel over its own channels: :class:`KernelFiles`.

Nothing here assumes a shared disk. The kernel-side half (``kernel_files.py``, run in
the kernel as a module kept in ``sys.modules``) is called through ``user_expressions``
beside an empty cell: no execution count, nothing in the notebook, and any executor
that runs Python cells carries it (a gateway's websocket, a local kernel's ZMQ).

Bytes travel in bounded chunks, one round trip each, so a big file streams and never
sits whole in memory on either side: uploads as base64 in the expression, downloads as
the raw buffer of a comm message the kernel publishes during the call (base64 in the
reply for an executor that does not hand over comm messages). Both sides hash what they wrote or
read (sha256) and the host compares sizes and hashes. Every reply is input from a
stranger: its length is bounded before it is parsed, its shape is checked, a chunk
must be full-sized unless it is the last, and a download stops at its byte bound.
Downloads are written through :func:`kernel_agent.edges.safefs.write_stream_beneath`
(atomic, no link followed, an explicit mode): a refused file leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from ..edges.safefs import write_stream_beneath
from ..errors import GatewayError, UnsafePath
from ..executors.base import AsyncExecutor
from ..executors.messages import MAX_EXPRESSION_SIZE

__all__ = ["TransferLimits", "KernelFiles", "RemoteEntry", "CommListener"]

MODULE = "_kernel_agent_files"


@dataclass(frozen=True)
class TransferLimits:
    #: raw bytes per upload chunk (base64 makes it 4/3 larger; Tornado's websocket
    #: takes at most 10 MiB per message by default)
    put_chunk: int = 4 * 1024 * 1024
    #: raw bytes per download chunk
    get_chunk: int = 4 * 1024 * 1024
    #: downloads take each chunk's raw bytes from a comm message's buffer (no base64,
    #: about 3x faster) when the executor hands over comm messages; else base64
    raw_chunks: bool = True
    #: seconds for one round trip (one chunk)
    call_timeout_s: float = 120.0


@dataclass(frozen=True)
class RemoteEntry:
    """One entry of the kernel's work dir, as the kernel reports it (unchecked name)."""

    path: str
    kind: str  # "file", "dir", "link" or "other"
    size: int
    mode: int


def _b64_len(n: int) -> int:
    return 4 * ((n + 2) // 3)


def _literal(value: object) -> str:
    """A Python literal for a str/int/bool/None (repr is exact for those)."""
    return repr(value)


class KernelFiles:
    """The host end of the transfer, for one Python kernel behind ``executor``."""

    def __init__(self, executor: AsyncExecutor, limits: TransferLimits = TransferLimits()) -> None:
        self.executor = executor
        self.limits = limits
        self._source = files(__package__).joinpath("kernel_files.py").read_text("utf-8")

    # ------------------------------------------------------------------ calls
    async def _call(self, expression: str, max_reply_chars: int) -> Any:
        """Evaluate ``expression`` in the kernel; its reply's JSON, bounded and parsed."""
        result = await self.executor.execute(
            "", timeout=self.limits.call_timeout_s, user_expressions={"r": expression}
        )
        if not result.ok:
            raise GatewayError(f"file transfer: the kernel did not answer ({result.status})")
        bundle = result.user_expressions.get("r")
        if not isinstance(bundle, dict):
            raise GatewayError("file transfer: the kernel sent no answer within the host's bounds")
        if bundle.get("status") != "ok":
            what = f"{bundle.get('ename', 'error')}: {bundle.get('evalue', '')}"
            raise GatewayError(f"file transfer failed in the kernel: {what:.300}")
        data = bundle.get("data")
        text = data.get("text/plain") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise GatewayError("file transfer: the kernel's answer has no text")
        if len(text) > max_reply_chars:
            raise GatewayError(
                f"file transfer: the kernel's answer is {len(text)} characters, "
                f"over the {max_reply_chars} bound"
            )
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # bad JSON, or JSON nested too deep
            raise GatewayError("file transfer: the kernel's answer is not JSON") from None

    def _fn(self, name: str, *args: object) -> str:
        """The expression calling kernel-side ``name(*args)`` (the module installed if missing)."""
        install = (
            f"(lambda s, M: s.modules.get(M) or s.modules.setdefault(M, (lambda m: "
            f"(exec({_literal(self._source)}, m.__dict__), m)[1])"
            f"(__import__('types').ModuleType(M))))(__import__('sys'), {MODULE!r})"
        )
        return f"{install}.{name}({', '.join(_literal(a) for a in args)})"

    async def setup(self, hint: str | None) -> str:
        """Make (or find ``hint`` again) the kernel's own work dir, and run there; its path."""
        reply = await self._call(self._fn("setup", hint), 10_000)
        work = reply.get("work") if isinstance(reply, dict) else None
        if not isinstance(work, str) or not work:
            raise GatewayError("file transfer: the kernel did not say where it works")
        return work

    async def digest(self, name: str) -> tuple[int, str] | None:
        """(size, sha256) of the kernel's regular file ``name``, or None."""
        reply = await self._call(self._fn("digest", name), 1000)
        if isinstance(reply, dict):
            size, sha = reply.get("size"), reply.get("sha256")
            if isinstance(size, int) and isinstance(sha, str):
                return size, sha
        return None

    async def remove(self, name: str) -> None:
        await self._call(self._fn("remove", name), 100)

    async def lstat(self, name: str) -> tuple[str, int, int] | None:
        """(kind, size, mode) of the kernel's ``name`` (a link not followed), or None."""
        reply = await self._call(self._fn("lstat", name), 200)
        if reply is None:
            return None
        if (
            isinstance(reply, list)
            and len(reply) == 3
            and reply[0] in ("file", "dir", "link", "other")
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in reply[1:])
        ):
            return reply[0], reply[1], reply[2]
        raise GatewayError(f"file transfer: a malformed answer {reply!r:.120}")

    async def usage(self, max_entries: int) -> int:
        """Bytes in the kernel's work dir, as the kernel says (it only limits its own room)."""
        reply = await self._call(self._fn("usage", max_entries), 100)
        if not isinstance(reply, int) or isinstance(reply, bool) or reply < 0:
            raise GatewayError(f"file transfer: a malformed answer {reply!r:.120}")
        return reply

    # ------------------------------------------------------------------ upload
    async def upload(self, path: Path, name: str) -> tuple[int, str]:
        """Send local file ``path`` to the kernel's ``name``; returns (size, sha256).

        Raises :class:`GatewayError` when the kernel's size or hash differs from ours.
        """
        chunk = self.limits.put_chunk

        async def blocks() -> AsyncIterator[bytes]:
            with open(path, "rb") as fh:
                while block := fh.read(chunk):
                    yield block

        return await self.upload_stream(blocks(), name)

    async def upload_stream(self, chunks: AsyncIterable[bytes], name: str) -> tuple[int, str]:
        """Send the bytes of ``chunks`` (any sizes) to the kernel's ``name``, re-cut into
        ``put_chunk`` pieces; returns (size, sha256).

        The kernel writes a temp file and renames it at the last chunk: an exception
        raised by ``chunks`` (a size limit, a client gone) drops the temp file, and a
        size or hash the kernel got wrong removes the file (:class:`GatewayError`).
        """
        chunk = self.limits.put_chunk
        digest = hashlib.sha256()
        size = 0
        pending = bytearray()
        reply: Any = None
        try:
            async for block in chunks:
                pending += block
                while len(pending) > chunk:  # more follows this piece: not the last
                    piece = bytes(pending[:chunk])
                    del pending[:chunk]
                    await self._put(name, piece, size, False)
                    digest.update(piece)
                    size += len(piece)
            piece = bytes(pending)
            reply = await self._put(name, piece, size, True)
            digest.update(piece)
            size += len(piece)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._call(self._fn("abort", name), 100))
            raise
        sha = digest.hexdigest()
        if not isinstance(reply, dict) or reply.get("size") != size or reply.get("sha256") != sha:
            await self.remove(name)
            raise GatewayError(
                f"file transfer: {name} arrived damaged in the kernel "
                f"(sent {size} bytes, sha256 {sha[:12]}; the kernel has {reply!r:.120})"
            )
        return size, sha

    async def _put(self, name: str, data: bytes, offset: int, last: bool) -> Any:
        text = base64.b64encode(data).decode("ascii")
        return await self._call(self._fn("put", name, text, offset, last), 1000)

    # ------------------------------------------------------------------ download
    async def listing(self, max_entries: int, max_depth: int) -> list[RemoteEntry]:
        """The entries below the kernel's work dir (breadth first, at most ``max_entries``,
        ``max_depth`` levels), as it reports them (shapes checked, names not)."""
        cap = max_entries
        reply = await self._call(self._fn("listing", cap, max_depth), cap * 1200)
        if not isinstance(reply, list) or len(reply) > cap:
            raise GatewayError("file transfer: the kernel's listing is not a bounded list")
        out = []
        for item in reply:
            if (
                isinstance(item, list)
                and len(item) == 4
                and isinstance(item[0], str)
                and item[1] in ("file", "dir", "link", "other")
                and all(isinstance(v, int) and not isinstance(v, bool) for v in item[2:])
                and item[2] >= 0
            ):
                out.append(RemoteEntry(item[0], item[1], item[2], item[3]))
            else:
                raise GatewayError(f"file transfer: a malformed listing entry {item!r:.120}")
        return out

    async def download(
        self,
        name: str,
        dest_root: str | os.PathLike[str] | int,
        dest_rel: str,
        *,
        size: int,
        mode: int = 0o644,
    ) -> int:
        """Fetch the kernel's ``name`` (``size`` bytes, as listed) into ``dest_root/dest_rel``.

        The target appears only once every byte arrived and matched the kernel's size
        and hash; a file that grows past ``size`` or a short or malformed chunk is
        refused (:class:`UnsafePath`) and leaves nothing behind.
        """
        chunk = self.limits.get_chunk
        raw_chunks = self.limits.raw_chunks and isinstance(self.executor, CommListener)
        if not raw_chunks:  # the chunk comes back as text: one user_expression the host keeps
            chunk = min(chunk, (MAX_EXPRESSION_SIZE - 1000) // 4 * 3)
        token = uuid.uuid4().hex if raw_chunks else None
        max_reply = 1000 if raw_chunks else _b64_len(chunk) + 200
        digest = hashlib.sha256()
        got = 0
        with write_stream_beneath(dest_root, dest_rel, mode=mode) as fh:
            while True:
                expression = self._fn("get", name, got, chunk, token)
                if token is not None:
                    with _RawChunk(cast(CommListener, self.executor), token, chunk) as taken:
                        reply = await self._call(expression, max_reply)
                    raw = taken.take(reply, name)
                else:
                    reply = await self._call(expression, max_reply)
                    raw = _chunk_bytes(reply, name)
                if len(raw) > chunk or got + len(raw) > size:
                    raise UnsafePath(f"{name} sent more than its listed {size} bytes")
                eof = reply.get("eof") is True
                if not eof and len(raw) != chunk:
                    raise UnsafePath(f"{name}: a short chunk before the end")
                fh.write(raw)
                digest.update(raw)
                got += len(raw)
                if eof:
                    break
            if got != size:
                raise UnsafePath(f"{name} is {got} bytes, not the listed {size}")
            if reply.get("size") != got or reply.get("sha256") != digest.hexdigest():
                raise UnsafePath(
                    f"{name}: the kernel's size or sha256 does not match the bytes received"
                )
        return got


@runtime_checkable
class CommListener(Protocol):
    """An executor that hands the kernel's comm messages to ``comm_handler`` while a cell runs."""

    comm_handler: Callable[[dict[str, Any]], Any] | None


class _RawChunk:
    """Takes the one comm message carrying a download chunk's raw bytes (as its only
    buffer) while one call runs; every other comm message goes to the executor's own
    handler (the host tools' bridge)."""

    def __init__(self, executor: CommListener, token: str, limit: int) -> None:
        self.executor, self.token, self.limit = executor, token, limit
        self.previous = executor.comm_handler
        self.chunks: list[bytes] = []
        self.problem: str | None = None

    def __enter__(self) -> _RawChunk:
        self.executor.comm_handler = self.feed
        return self

    def __exit__(self, *exc: object) -> None:
        self.executor.comm_handler = self.previous

    def feed(self, msg: dict[str, Any]) -> Any:
        content = msg.get("content")
        data = content.get("data") if isinstance(content, dict) else None
        if not isinstance(data, dict) or data.get("kernel_agent_files") != self.token:
            return self.previous(msg) if self.previous is not None else None
        buffers = msg.get("buffers")
        if self.chunks or not isinstance(buffers, list) or len(buffers) != 1:
            self.problem = "more than one chunk, or a chunk without its bytes"
        elif len(buffers[0]) > self.limit:
            self.problem = f"a chunk of {len(buffers[0])} bytes, over {self.limit}"
        else:
            self.chunks.append(bytes(buffers[0]))
        return None

    def take(self, reply: Any, name: str) -> bytes:
        """The chunk's bytes, checked against the reply's count."""
        if self.problem is not None:
            raise UnsafePath(f"{name}: {self.problem}")
        if not self.chunks:
            raise UnsafePath(f"{name}: no chunk arrived")
        raw = self.chunks[0]
        if not isinstance(reply, dict) or reply.get("sent") != len(raw):
            raise UnsafePath(f"{name}: the chunk does not match the kernel's count")
        return raw


def _chunk_bytes(reply: Any, name: str) -> bytes:
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, str):
        raise UnsafePath(f"{name}: a malformed chunk")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise UnsafePath(f"{name}: a chunk that is not base64") from None
