"""The sessions a server hosts: creation (from the warm pool), limits, TTL culling, the index.

Each hosted session is one :class:`~kernel_agent.session.Session` (a kernel, its
private work dir, its transcript) plus what the service knows about it: when it
was last used, its TTL, its runs. Everything the HTTP layer does is one call here.

Ending a session (TTL, SIGTERM, a server that stops) *finalises* it: the files the
kernel wrote are archived beside the notebook (one ``work.zip``: content, whose members the
file routes then serve, read-only), the clean notebook is written, and the kernel stops.
DELETE is different: the kernel stops and its work dir goes, and the session leaves the
index. A small JSON index in the state dir lists every session, so after a restart the ones
that were live show as ended with their notebooks and files still downloadable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import Deleted, Ended, NotFound, Stopping, TooBusy, TooLarge, UnsafePath
from ..sandbox.room import keep_room, remove_tree
from ..session import CellRun, Session
from ..settings import Settings
from ..workdir import ArchiveWorkDir, WorkDir
from .hosted import Hosted, code_cells, count_cells
from .limits import Limiter
from .pool import WarmPool
from .runs import HostedRun, event_json

__all__ = ["ServiceConfig", "Hosted", "SessionManager"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: how long the walk of a work dir's files counts for uploads (the kernel writes meanwhile)
_USAGE_TTL_S = 5.0


@dataclass
class ServiceConfig:
    """What ``kernel-agent serve`` is configured with (besides the kernel settings)."""

    settings: Settings
    state_dir: Path
    token: str | None = None
    session_ttl: float = 7200.0
    max_sessions: int = 20
    max_concurrent: int = 4
    max_queue: int = 32
    pool: int = 0
    max_file_bytes: int = 100 * 1024 * 1024
    max_session_bytes: int = 1024 * 1024 * 1024
    cull_interval: float | None = None  # default: a quarter of the TTL, at most 30 s
    #: where the server listens, and the extra Host names it answers to (DNS rebinding)
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    #: largest JSON request body (file uploads have their own limits)
    max_body_bytes: int = 4 * 1024 * 1024
    #: clients may ask for ``local``/``local:PATH`` models (a GGUF path on this host)
    allow_local_models: bool = False
    #: seconds the server waits for interrupted cells on SIGTERM before it cancels them
    stop_grace: float = 2.0


class SessionManager:
    """Every hosted session, the limits, the warm pool and the culler."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.state_dir = config.state_dir
        self.sessions: dict[str, Hosted] = {}
        self.limiter = Limiter(config.max_concurrent, config.max_queue)
        self.pool = WarmPool(self.base_settings, config.pool)
        self._culler: asyncio.Task[None] | None = None
        self._starting = 0
        self._closed = False
        self._cull_wake = asyncio.Event()

    @property
    def base_settings(self) -> Settings:
        settings = self.config.settings
        if settings.cwd is None:  # sessions see an empty directory, not the server's cwd
            _private_dir(self.config.state_dir)
            view = self.config.state_dir / "view"
            view.mkdir(exist_ok=True)
            settings = settings.with_(cwd=view.resolve())
        return settings

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        _private_dir(self.state_dir)
        self.pool.settings = self.base_settings
        self._load_index()
        self.pool.start()
        self._culler = asyncio.ensure_future(self._cull_forever())

    async def stopping(self) -> None:
        """The server is about to stop: refuse new work, interrupt every running cell so its
        request is answered with what it printed so far (recorded in the notebook), and
        after ``stop_grace`` seconds cancel what still runs (executes answered 503, agent
        runs ended ``cancelled``, so their event streams end too)."""
        self._closed = True
        busy = [h for h in self.sessions.values() if h.session is not None and h.busy]
        for hosted in busy:
            with contextlib.suppress(Exception):
                await hosted.session.interrupt()  # type: ignore[union-attr]
        pending = {t for h in busy for t in h.inflight} | {
            r.task_handle
            for h in busy
            for r in h.runs.values()
            if r.task_handle is not None and not r.task_handle.done()
        }
        if pending:
            _, late = await asyncio.wait(pending, timeout=self.config.stop_grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=1.0)

    async def shutdown(self) -> None:
        """Finalise every live session (notebook and files kept) and stop every kernel."""
        self._closed = True
        if self._culler is not None:
            self._culler.cancel()
        await self.pool.close()
        live = [h for h in self.sessions.values() if h.session is not None]
        await asyncio.gather(*(self.finalise(h, "ended", "server stopped") for h in live))
        self._save_index()

    # ------------------------------------------------------------------- sessions
    def live_count(self) -> int:
        return sum(1 for h in self.sessions.values() if h.session is not None) + self._starting

    async def create(
        self, *, kernel: str | None = None, ttl: float | None = None, **overrides: Any
    ) -> Hosted:
        if self._closed:
            raise TooBusy("the server is stopping", retry_after=5)
        if self.live_count() >= self.config.max_sessions:
            raise TooBusy(
                f"{self.config.max_sessions} sessions are live (--max-sessions); delete one", 5
            )
        ttl = self.config.session_ttl if ttl is None else float(ttl)
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self._check_model(overrides.get("model"))
        settings = self.base_settings.with_(kernel_name=kernel, **overrides)
        sid = uuid.uuid4().hex[:16]
        folder = self.state_dir / "sessions" / sid
        _private_dir(folder.parent)
        _private_dir(folder)
        pooled = self.pool.take() if self.pool.matches(settings) else None
        session = Session(
            settings,
            notebook=folder / "notebook.ipynb",
            front_end="serve",
            executor=pooled,
            own_executor=True,
            session_id=sid,
            metadata={"source": "serve"},
        )
        self._starting += 1
        try:
            await session.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await session.close()
            raise
        finally:
            self._starting -= 1
        hosted = Hosted(
            sid,
            settings.kernel_name,
            ttl,
            session.notebook_path,
            session=session,
            settings=settings,
            work_dir=str(session.work_dir) if session.files.local else None,
            sandbox=self._public(session.isolation.note),
        )
        if hosted.work_dir is not None:
            # the room is ours to collect after a crash: no other process prunes it
            with contextlib.suppress(OSError, ValueError):
                keep_room(Path(hosted.work_dir), self.index_path)
        self.sessions[sid] = hosted
        self._cull_wake.set()
        self._save_index()
        return hosted

    def _public(self, value: Any) -> Any:
        """``value`` (an event's JSON, a note) with the server's state dir left out of its
        strings: clients see ``sessions/<id>/...``, not where the server keeps its files."""
        prefix = f"{self.state_dir}{os.sep}"
        if isinstance(value, str):
            return value.replace(prefix, "").replace(str(self.state_dir), ".")
        if isinstance(value, dict):
            return {k: self._public(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._public(v) for v in value]
        return value

    def _check_model(self, model: str | None) -> None:
        """A client's model: ``local``/``local:PATH`` (a model served from a file on this
        host) only when the operator allows it (``--allow-local-models``)."""
        from ..llm.providers import is_local_spec

        if model is None or self.config.allow_local_models:
            return
        if is_local_spec(model):
            raise ValueError(
                f"model {model!r} is served from this host's files: this server does not "
                "let clients choose it (the operator can pass --allow-local-models)"
            )

    def get(self, sid: str) -> Hosted:
        hosted = self.sessions.get(sid)
        if hosted is None:
            raise NotFound(f"no session {sid}")
        return hosted

    def live(self, sid: str) -> Session:
        hosted = self.get(sid)
        if hosted.session is None:
            raise Ended(
                f"session {sid} is {hosted.status} ({hosted.reason}); "
                "its notebook and files stay readable"
            )
        hosted.last_active = time.time()
        return hosted.session

    async def delete(self, sid: str) -> None:
        """Stop the kernel and remove the work dir (and the session from the index)."""
        hosted = self.get(sid)
        hosted.deleted = True
        await self._cancel_runs(hosted)
        await self._cancel_inflight(hosted)
        session, hosted.session = hosted.session, None
        self.sessions.pop(sid, None)
        if session is not None:
            await session.close()
        self._save_index()
        folder = hosted.notebook.parent  # its notebooks and delivered files: unreachable now
        if folder.parent == self.state_dir / "sessions" and folder.name == sid:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def finalise(self, hosted: Hosted, status: str, reason: str) -> None:
        """End ``hosted``, keeping everything: files archived beside the notebook, the clean
        notebook written, the kernel stopped."""
        from ..edges.delivery import deliver
        from ..executors.gateway import AsyncGatewaySession

        await self._cancel_runs(hosted)
        await self._cancel_inflight(hosted)
        session, hosted.session = hosted.session, None
        if session is None:
            return
        # "ending" until everything is kept: a client that sees the final status reads the
        # whole notebook (its end recorded) and the archive, never a half-written one
        hosted.status, hosted.reason = "ending", reason
        try:
            if session.transcript is not None:
                hosted.cells = code_cells(session.transcript.cells)
            executor = session.executor
            work = executor.kernel_cwd if executor is not None else None
            remote = executor.files if isinstance(executor, AsyncGatewaySession) else None
            if work is not None and executor is not None and work != executor.cwd:
                # a private work dir on this host (a gateway kernel's has none here: never
                # the server's own --cwd)
                with contextlib.suppress(Exception):  # a worker's start: off the loop
                    await asyncio.to_thread(deliver, work, hosted.notebook)
            elif remote is not None and remote.work is not None:
                # a gateway kernel's own work dir: pulled over its channels, checked
                with contextlib.suppress(Exception):
                    found = await remote.deliver(hosted.notebook)
                    for note in found.notes:
                        log.info("session %s: not kept: %s", hosted.id, note)
            with contextlib.suppress(Exception):
                session.write_clean()
        finally:
            try:
                await session.close()
            finally:
                hosted.status, hosted.ended = status, time.time()
                self._save_index()

    async def _cancel_inflight(self, hosted: Hosted) -> None:
        """Cancel the execute requests running in ``hosted``: each is answered (410 or 503),
        its cell is interrupted and its ``--max-concurrent`` slot freed."""
        pending = set(hosted.inflight)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5.0)

    async def _cancel_runs(self, hosted: Hosted) -> None:
        for run in hosted.runs.values():
            if run.task_handle is not None and not run.task_handle.done():
                run.task_handle.cancel()
                with contextlib.suppress(BaseException):
                    await run.task_handle

    async def _cull_forever(self) -> None:
        """Wake at the next expiry (or when a session is created), at most ``cull_interval``
        apart: a session's own short TTL ends it on time, not at the server's pace."""
        longest = self.config.cull_interval or min(30.0, self.config.session_ttl / 4)
        while True:
            now = time.time()
            due = [
                h.last_active + h.ttl - now
                for h in self.sessions.values()
                if h.session is not None and not h.busy and not h.inflight
            ]
            wait = min([longest, *due])
            self._cull_wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._cull_wake.wait(), max(0.05, wait + 0.01))
            await self.cull()

    async def cull(self) -> list[str]:
        """Finalise every live, idle session past its TTL; returns their ids."""
        now = time.time()
        expired = [
            h for h in self.sessions.values()
            if h.session is not None and h.busy == 0 and not h.inflight
            and now - h.last_active > h.ttl
        ]  # fmt: skip
        for hosted in expired:
            await self.finalise(hosted, "expired", f"idle for more than {hosted.ttl:g} s")
        return [h.id for h in expired]

    # ----------------------------------------------------------------------- work
    @contextlib.asynccontextmanager
    async def _busy(self, sid: str) -> AsyncIterator[tuple[Hosted, Session]]:
        session = self.live(sid)
        hosted = self.get(sid)
        hosted.busy += 1
        try:
            async with self.limiter.slot():
                yield hosted, session
        finally:
            hosted.busy -= 1
            hosted.last_active = time.time()
            self._cull_wake.set()

    async def execute(self, sid: str, code: str, timeout: float | None) -> CellRun:
        """Run one cell. Cancelling the caller (a client gone) interrupts the cell and frees
        its slot; DELETE or a stopping server cancels it and the caller gets 410 or 503."""
        return await self._operation(sid, lambda: self._execute(sid, code, timeout), "the cell ran")

    async def _operation(
        self, sid: str, work: Callable[[], Coroutine[Any, Any, T]], during: str
    ) -> T:
        """Run ``work`` (an execute, an upload) as an operation of session ``sid``: the
        culler leaves the session alone until it ends (its TTL counts from then on);
        DELETE, the session's end or a stopping server cancel it (410, 409, 503)."""
        hosted = self.get(sid)
        self.live(sid)
        task = asyncio.ensure_future(work())
        hosted.inflight.add(task)
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            hosted.inflight.discard(task)
            hosted.last_active = time.time()
            self._cull_wake.set()  # its TTL counts from now
        if task.cancelled():
            if hosted.deleted:
                raise Deleted(f"session {sid} was deleted while {during}")
            if self._closed:
                raise Stopping(f"the server stopped while {during}; it was interrupted")
            raise Ended(f"session {sid} ended while {during}")
        return task.result()

    async def _execute(self, sid: str, code: str, timeout: float | None) -> CellRun:
        async with self._busy(sid) as (_, session):
            return await session.run_cell(
                code, timeout, provenance={"source": "serve", "tool": "execute"}
            )

    async def start_run(self, sid: str, task: str) -> HostedRun:
        """Start an agent run on ``task`` in its own asyncio task; returns at once."""
        session = self.live(sid)
        hosted = self.get(sid)
        if not task.strip():
            raise ValueError("the task is empty")
        if (
            self.limiter.running >= self.limiter.limit
            and self.limiter.waiting >= self.limiter.queue
        ):
            raise TooBusy("too many cells or runs are executing; try again later")
        run = HostedRun(task)
        hosted.runs[run.id] = run

        async def drive() -> None:
            try:
                async with self._busy(sid):
                    async for event in session.run_task(
                        task, settings=hosted.settings,
                        provenance={"source": "serve", "tool": "run", "run": run.id},
                    ):  # fmt: skip
                        item = self._public(event_json(event))
                        if item["type"] == "RunFinished":
                            run.result = item.get("result")
                        run.push(item)
                run.finish("finished")
            except asyncio.CancelledError:
                run.finish("cancelled", "the session ended during the run")
                raise
            except Exception as exc:  # noqa: BLE001 - reported to the client as the run's error
                run.finish("failed", f"{type(exc).__name__}: {exc}")

        run.task_handle = asyncio.ensure_future(drive())
        return run

    def run(self, sid: str, run_id: str) -> HostedRun:
        run = self.get(sid).runs.get(run_id)
        if run is None:
            raise NotFound(f"no run {run_id} in session {sid}")
        return run

    # ---------------------------------------------------------------------- files
    async def upload(
        self, sid: str, path: str, chunks: AsyncIterable[bytes], declared: int | None
    ) -> int:
        """Write an upload into the session's work dir; the session stays alive meanwhile,
        and its end (TTL, DELETE, a stop) cancels the upload (no file is left)."""
        work = lambda: self._upload(sid, path, chunks, declared)  # noqa: E731
        return await self._operation(sid, work, "the file was uploaded")

    async def _upload(
        self, sid: str, path: str, chunks: AsyncIterable[bytes], declared: int | None
    ) -> int:
        session = self.live(sid)
        hosted = self.get(sid)
        limit = self.config.max_file_bytes
        if declared is not None and declared > limit:
            raise TooLarge(self._too_large(declared, limit, limit))
        # one upload at a time per session: the room it checks is the room it writes into.
        # The kernel's own files count too; walking them happens off the event loop.
        async with hosted.upload_lock:
            now = time.monotonic()
            if hosted.usage is None or now - hosted.usage[0] > _USAGE_TTL_S:
                hosted.usage = (now, await session.disk_usage())
            used = hosted.usage[1]
            room = self.config.max_session_bytes - used
            if declared is not None and declared > min(limit, room):
                raise TooLarge(self._too_large(declared, limit, room))

            async def bounded() -> AsyncIterator[bytes]:
                size = 0
                async for chunk in chunks:
                    size += len(chunk)
                    if size > min(limit, room):
                        raise TooLarge(self._too_large(size, limit, room))
                    yield chunk

            size = await session.upload(path, bounded())
            hosted.usage = (hosted.usage[0], used + size)  # a replaced file counts twice: safe
            return size

    @staticmethod
    def _too_large(size: int, limit: int, room: int) -> str:
        if size > limit:
            return f"the file is over the {limit} byte limit per file"
        return f"the session's files would be over its disk limit ({max(room, 0)} bytes left)"

    def file_root(self, sid: str) -> WorkDir:
        """Where the session's files are read from: the live kernel's work dir (on this
        host or a remote kernel's own), or the files kept beside an ended one's notebook."""
        hosted = self.get(sid)
        if hosted.session is not None:
            hosted.last_active = time.time()
            return hosted.session.files
        return ArchiveWorkDir(hosted.files_archive)

    async def list_files(self, sid: str) -> list[dict[str, Any]]:
        root = self.file_root(sid)
        return [vars(e) for e in await root.list(max_entries=2000, max_depth=16)]

    async def open_file(self, sid: str, path: str) -> tuple[int, int]:
        from ..errors import ConfigError

        try:
            return await self.file_root(sid).open(path)
        except ConfigError as exc:
            if "no such file" in str(exc):
                raise NotFound(f"no file {path}") from None
            if "is a directory" in str(exc):
                raise UnsafePath(str(exc)) from None
            raise

    async def delete_file(self, sid: str, path: str) -> None:
        from ..errors import ConfigError

        session = self.live(sid)
        self.get(sid).usage = None  # walk again at the next upload
        try:
            await session.delete_file(path)
        except ConfigError as exc:
            if "no such file" in str(exc):
                raise NotFound(str(exc)) from None
            raise

    # ---------------------------------------------------------------------- index
    @property
    def index_path(self) -> Path:
        return self.state_dir / "index.json"

    def _save_index(self) -> None:
        data = {"sessions": [h.index_entry() for h in self.sessions.values()]}
        tmp = self.index_path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(data, indent=1))
        os.replace(tmp, self.index_path)

    def _load_index(self) -> None:
        try:
            data = json.loads(self.index_path.read_text())
        except (OSError, ValueError):
            return
        from ..edges.delivery import deliver

        for entry in data.get("sessions", []):
            try:
                hosted = Hosted(
                    entry["id"],
                    entry.get("kernel", ""),
                    float(entry.get("ttl_s", 0)),
                    Path(entry["notebook"]),
                    created=entry.get("created", 0.0),
                    last_active=entry.get("last_active", 0.0),
                    status=entry.get("status", "ended"),
                    ended=entry.get("ended"),
                    reason=entry.get("reason"),
                    cells=int(entry.get("cells", 0)),
                    sandbox=entry.get("sandbox", ""),
                )
            except (KeyError, TypeError, ValueError):
                continue
            if hosted.status in ("live", "ending"):  # the server died before finalising it
                hosted.status, hosted.reason, hosted.ended = (
                    "ended",
                    "the server stopped abruptly",
                    time.time(),
                )
                hosted.cells = count_cells(hosted.notebook, hosted.cells)
                work = entry.get("work_dir")
                if work and Path(work).is_dir():
                    with contextlib.suppress(Exception):
                        deliver(Path(work), hosted.notebook)
                    _remove_room(Path(work))
            self.sessions[hosted.id] = hosted
        self._save_index()


def _private_dir(path: Path) -> None:
    """Make ``path`` (and missing parents) a directory only this server's user can enter.

    Kernels run as other uids, and their sandbox does not show the state dir at all (only
    its ``view``); the mode is the second wall, and the only one for an unsandboxed kernel.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        log.warning("%s was readable by others: now mode 0700", path)
        path.chmod(0o700)


def _remove_room(work: Path) -> None:
    """Remove the room (``<tmp>/ka-*/w``'s parent) of a kernel a crashed server left, once
    its files are delivered; only a root-of-ours, 0700 ``ka-*`` dir in the temp dir."""
    room = work.parent
    try:
        st = os.lstat(room)
    except OSError:
        return
    if (
        work.name == "w"
        and room.name.startswith("ka-")
        and str(room.parent) in {tempfile.gettempdir(), "/tmp"}
        and stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.geteuid()
        and stat.S_IMODE(st.st_mode) == 0o700
    ):
        remove_tree(room)  # unmounts the work dir's own filesystem first
