"""The sessions a server hosts: creation (from the warm pool), limits, TTL culling, the index.

Each hosted session is one :class:`~kernel_agent.session.Session` (a kernel, its
private work dir, its transcript) plus what the service knows about it: when it
was last used, its TTL, its runs. Everything the HTTP layer does is one call here.

Ending a session (TTL, SIGTERM, a server that stops) *finalises* it: the files the
kernel wrote are copied out of its work dir beside the notebook, the clean notebook
is written, and the kernel stops. DELETE is different: the kernel stops and its work
dir goes, and the session leaves the index. A small JSON index in the state dir
lists every session, so after a restart the ones that were live show as ended with
their notebooks and files still downloadable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..safefs import UnsafePath
from ..session import CellRun, Session
from ..settings import Settings
from .limits import Ended, Limiter, NotFound, TooBusy, TooLarge
from .pool import WarmPool
from .runs import HostedRun, event_json

__all__ = ["ServiceConfig", "Hosted", "SessionManager"]

log = logging.getLogger(__name__)


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


@dataclass
class Hosted:
    """A session as the service knows it; ``session`` is None once it has ended."""

    id: str
    kernel: str
    ttl: float
    notebook: Path
    created: float = field(default_factory=time.time)
    last_active: float = field(default_factory=time.time)
    status: str = "live"  # live | expired | ended
    ended: float | None = None
    reason: str | None = None
    session: Session | None = None
    settings: Settings | None = None
    work_dir: str | None = None
    cells: int = 0
    busy: int = 0
    runs: dict[str, HostedRun] = field(default_factory=dict)
    sandbox: str = ""

    @property
    def files_dir(self) -> Path:
        """Where the kernel's files are kept once the session has ended."""
        return self.notebook.parent / f"{self.notebook.stem}_files" / "work"

    @property
    def clean_notebook(self) -> Path:
        from ..notebook.clean import clean_path_for

        return clean_path_for(self.notebook)

    def info(self) -> dict[str, Any]:
        now = time.time()
        live = self.session is not None
        transcript = self.session.transcript if self.session is not None else None
        cells = len(transcript.cells) if transcript is not None else self.cells
        return {
            "id": self.id,
            "status": self.status,
            "kernel": self.kernel,
            "sandbox": self.sandbox,
            "created": self.created,
            "last_active": self.last_active,
            "age_s": round(now - self.created, 1),
            "ttl_s": self.ttl,
            "ttl_left_s": round(max(0.0, self.last_active + self.ttl - now), 1) if live else 0.0,
            "cells": cells,
            "busy": self.busy > 0,
            "ended": self.ended,
            "reason": self.reason,
            "runs": [r.id for r in self.runs.values()],
        }

    def index_entry(self) -> dict[str, Any]:
        entry = self.info()
        entry.update(notebook=str(self.notebook), work_dir=self.work_dir)
        return entry


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

    @property
    def base_settings(self) -> Settings:
        settings = self.config.settings
        if settings.cwd is None:  # sessions see an empty directory, not the server's cwd
            view = self.config.state_dir / "view"
            view.mkdir(parents=True, exist_ok=True)
            settings = settings.with_(cwd=view.resolve())
        return settings

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.pool.settings = self.base_settings
        self._load_index()
        self.pool.start()
        self._culler = asyncio.ensure_future(self._cull_forever())

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
        settings = self.base_settings.with_(kernel_name=kernel, **overrides)
        sid = uuid.uuid4().hex[:16]
        folder = self.state_dir / "sessions" / sid
        folder.mkdir(parents=True, exist_ok=True)
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
            work_dir=str(session.work_dir),
            sandbox=session.isolation.note,
        )
        self.sessions[sid] = hosted
        self._save_index()
        return hosted

    def get(self, sid: str) -> Hosted:
        hosted = self.sessions.get(sid)
        if hosted is None:
            raise NotFound(f"no session {sid}")
        return hosted

    def live(self, sid: str) -> Session:
        hosted = self.get(sid)
        if hosted.session is None:
            raise Ended(
                f"session {sid} has {hosted.status} ({hosted.reason}); "
                "its notebook and files stay readable"
            )
        hosted.last_active = time.time()
        return hosted.session

    async def delete(self, sid: str) -> None:
        """Stop the kernel and remove the work dir (and the session from the index)."""
        hosted = self.get(sid)
        await self._cancel_runs(hosted)
        session, hosted.session = hosted.session, None
        self.sessions.pop(sid, None)
        if session is not None:
            await session.close()
        self._save_index()

    async def finalise(self, hosted: Hosted, status: str, reason: str) -> None:
        """End ``hosted``, keeping everything: files copied beside the notebook, the clean
        notebook written, the kernel stopped."""
        from ..delivery import deliver_work_files

        await self._cancel_runs(hosted)
        session, hosted.session = hosted.session, None
        if session is None:
            return
        hosted.status, hosted.reason, hosted.ended = status, reason, time.time()
        try:
            if session.transcript is not None:
                hosted.cells = len(session.transcript.cells)
            with contextlib.suppress(Exception):
                deliver_work_files(session.work_dir, hosted.notebook)
            with contextlib.suppress(Exception):
                session.write_clean()
        finally:
            await session.close()
            self._save_index()

    async def _cancel_runs(self, hosted: Hosted) -> None:
        for run in hosted.runs.values():
            if run.task_handle is not None and not run.task_handle.done():
                run.task_handle.cancel()
                with contextlib.suppress(BaseException):
                    await run.task_handle

    async def _cull_forever(self) -> None:
        interval = self.config.cull_interval or min(30.0, self.config.session_ttl / 4)
        while True:
            await asyncio.sleep(max(0.05, interval))
            await self.cull()

    async def cull(self) -> list[str]:
        """Finalise every live, idle session past its TTL; returns their ids."""
        now = time.time()
        expired = [
            h for h in self.sessions.values()
            if h.session is not None and h.busy == 0 and now - h.last_active > h.ttl
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

    async def execute(self, sid: str, code: str, timeout: float | None) -> CellRun:
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
        notebook = hosted.notebook.parent / "runs" / f"{run.id}.ipynb"

        async def drive() -> None:
            try:
                async with self._busy(sid):
                    async for event in session.run_task(
                        task, notebook=notebook, settings=hosted.settings,
                        provenance={"source": "serve", "tool": "run", "run": run.id},
                    ):  # fmt: skip
                        item = event_json(event)
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
        session = self.live(sid)
        limit = self.config.max_file_bytes
        room = self.config.max_session_bytes - session.disk_usage()
        if declared is not None and declared > min(limit, room):
            raise TooLarge(self._too_large(declared, limit, room))

        async def bounded() -> AsyncIterator[bytes]:
            size = 0
            async for chunk in chunks:
                size += len(chunk)
                if size > min(limit, room):
                    raise TooLarge(self._too_large(size, limit, room))
                yield chunk

        return await session.upload(path, bounded())

    @staticmethod
    def _too_large(size: int, limit: int, room: int) -> str:
        if size > limit:
            return f"the file is over the {limit} byte limit per file"
        return f"the session's files would be over its disk limit ({max(room, 0)} bytes left)"

    def file_root(self, sid: str) -> tuple[Session | None, Path]:
        """(live session or None, the directory the session's files are read from)."""
        hosted = self.get(sid)
        if hosted.session is not None:
            hosted.last_active = time.time()
            return hosted.session, hosted.session.work_dir
        return None, hosted.files_dir

    def list_files(self, sid: str) -> list[dict[str, Any]]:
        from ..safefs import list_beneath

        _, root = self.file_root(sid)
        if not root.is_dir():
            return []
        return [vars(e) for e in list_beneath(root, max_entries=2000, max_depth=16)]

    def open_file(self, sid: str, path: str) -> tuple[int, int]:
        from ..safefs import open_beneath

        _, root = self.file_root(sid)
        try:
            fd = open_beneath(root, path)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"no file {path}") from None
        except IsADirectoryError:
            raise UnsafePath(f"{path} is a directory") from None
        return fd, os.fstat(fd).st_size

    def delete_file(self, sid: str, path: str) -> None:
        from ..errors import ConfigError

        session = self.live(sid)
        try:
            session.delete_file(path)
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
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.index_path)

    def _load_index(self) -> None:
        try:
            data = json.loads(self.index_path.read_text())
        except (OSError, ValueError):
            return
        from ..delivery import deliver_work_files

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
            if hosted.status == "live":  # the server died without finalising it
                hosted.status, hosted.reason, hosted.ended = (
                    "ended",
                    "the server stopped abruptly",
                    time.time(),
                )
                work = entry.get("work_dir")
                if work and Path(work).is_dir():
                    with contextlib.suppress(Exception):
                        deliver_work_files(Path(work), hosted.notebook)
            self.sessions[hosted.id] = hosted
        self._save_index()
