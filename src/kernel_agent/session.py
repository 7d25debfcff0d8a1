"""A working session: one kernel, its work dir, its transcript, its namespace and rebuild log.

Every front end (the MCP server, the HTTP service, ...) maps its requests to calls on
one :class:`Session`, so timeouts, restarts, state rebuild, provenance and the clean
notebook behave the same everywhere. Nothing here knows about a protocol: callers
pass their provenance (``{"source": "mcp", "client": {...}, "tool": "run_cell"}``) and
get plain data back.

Async only, on an asyncio loop. Calls that use the kernel take a lock, so concurrent
requests run one after another; :meth:`Session.interrupt` does not, so it can stop
a running cell. A caller cancelled while its cell runs (a client that gave up)
interrupts the kernel, and the cell is still recorded when it stops.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .edges.images import BoundedImage, from_data_url
from .edges.safefs import Entry
from .errors import ConfigError, NotebookError
from .events import CellOutput
from .executors.base import AsyncExecutor, Isolation, OutputCallback
from .kernel_state import CellRecord, KernelState
from .kernel_state.namespace import VariableInfo
from .llm.view import budget_text, render_cell
from .notebook import cellmeta as M
from .notebook.transcript import Transcript
from .notebook.worker import bound_images
from .results import CellResult
from .settings import Settings
from .workdir import LocalWorkDir, RemoteWorkDir, WorkDir

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from .notebook.verify import VerifyReport

__all__ = ["Session", "CellRun", "default_session_notebook"]

#: Largest file ``read_file`` returns, in bytes.
MAX_READ_BYTES = 256 * 1024
#: Most images one cell hands back.
MAX_IMAGES = 4


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def default_session_notebook(settings: Settings, front_end: str) -> Path:
    """``notebooks/<time>-<front end>.ipynb`` under ``settings.notebook_dir``."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return settings.notebook_dir / f"{stamp}-{front_end}.ipynb"


@dataclass
class CellRun:
    """One executed cell as a front end reports it.

    ``text`` is the model's view (:meth:`KernelState.view`: budgeted outputs, clean
    traceback, the namespace change and any rebuild note); ``images`` are bounded
    copies of the cell's images; ``index`` is the cell's position in the transcript.
    """

    result: CellResult
    index: int
    text: str
    images: list[BoundedImage] = field(default_factory=list)
    variables: str = ""
    rebuild_note: str = ""


class Session:
    """A kernel and everything recorded about it, shared by front ends.

    ``executor`` defaults to the one :func:`~kernel_agent.executors.factory.make_executor`
    builds from ``settings`` (a local sandboxed kernel, or a gateway kernel).
    ``notebook`` is where the transcript goes; ``front_end`` names who drives the
    session (notebook metadata and the default file name); ``metadata`` is added to
    the notebook's ``metadata.kernel_agent``. A caller that hands over an executor it
    started itself (a warm pool) passes ``own_executor=True`` (the session stops it).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        notebook: str | Path | None = None,
        front_end: str = "session",
        executor: AsyncExecutor | None = None,
        metadata: Mapping[str, Any] | None = None,
        own_executor: bool | None = None,
        session_id: str | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self.front_end = front_end
        self.id = session_id or uuid.uuid4().hex
        self.notebook_path = (
            Path(notebook) if notebook else default_session_notebook(self.settings, front_end)
        )
        self.executor = executor
        self._own_executor = executor is None if own_executor is None else own_executor
        #: what isolates the kernel (from the executor once started)
        self.isolation = Isolation("unknown", note="not started")
        #: the kernel's state (its transcript, namespace, state cells), once started
        self.state: KernelState | None = None
        self._metadata = dict(metadata or {})
        self._lock = asyncio.Lock()
        self._clients: list[dict[str, Any]] = []
        self._background: set[asyncio.Future[Any]] = set()

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start the kernel and open the transcript (idempotent)."""
        if self.executor is None:
            from .executors.factory import make_executor

            self.executor = make_executor(self.settings)
        self.isolation = self.executor.isolation
        if not self.executor.language_info:
            await self.executor.start()
        if self.state is None:
            transcript = Transcript(
                self.notebook_path,
                kernelspec=self.executor.kernelspec,
                language_info=self.executor.language_info,
                metadata={
                    **self._metadata,
                    "session": {
                        "id": self.id,
                        "front_end": self.front_end,
                        "started": _now_iso(),
                        "work_dir": str(self.work_dir),
                        "clients": self._clients,
                    },
                    "sandbox": self.isolation.to_metadata(),
                },
            )
            transcript.save()
            self.state = KernelState(self.executor, transcript, self.settings)

    async def close(self) -> None:
        """Record the end of the session and stop the kernel (if this session started it)."""
        for pending in list(self._background):
            pending.cancel()
        if self.transcript is not None:
            session = dict(self.transcript.run_metadata.get("session") or {})
            session["ended"] = _now_iso()
            try:
                self.transcript.update_run_metadata(session=session)
            except NotebookError:
                pass
        executor, self.executor = self.executor, None
        if executor is not None and self._own_executor:
            await executor.shutdown()

    async def __aenter__(self) -> Session:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def work_dir(self) -> Path:
        """The directory the kernel works in (the file tools' root): its private work dir
        when it has one, else the directory it was started in."""
        work = self.executor.kernel_cwd if self.executor is not None else None
        return Path(work or self.settings.cwd or Path.cwd()).resolve()

    @property
    def view_dir(self) -> Path:
        """The user's directory the kernel sees (read-only when sandboxed)."""
        view = self.executor.cwd if self.executor is not None else None
        return Path(view or self.settings.cwd or Path.cwd()).resolve()

    @property
    def transcript(self) -> Transcript | None:
        """The session's notebook (readable after :meth:`close` too)."""
        return self.state.transcript if self.state is not None else None

    @property
    def python(self) -> bool:
        return self.executor is not None and self.executor.language_info.get("name") == "python"

    def add_client(self, info: Mapping[str, Any]) -> None:
        """Record a client of this session (name, version, transport) in the notebook, once."""
        entry = {k: v for k, v in info.items() if v is not None}
        if entry in self._clients:
            return
        self._clients.append(entry)
        if self.transcript is not None:
            self.transcript.run_metadata["session"]["clients"] = list(self._clients)
            self.transcript.save()

    def _recorded(self) -> Transcript:
        """The transcript (readable after :meth:`close` too)."""
        if self.transcript is None:
            raise ConfigError("the session is not started")
        return self.transcript

    def _started(self) -> KernelState:
        if self.executor is None or self.state is None:
            raise ConfigError("the session is not started")
        return self.state

    # --------------------------------------------------------------------- cells
    async def run_cell(
        self,
        code: str,
        timeout: float | None = None,
        *,
        provenance: Mapping[str, Any] | None = None,
        on_output: OutputCallback | None = None,
    ) -> CellRun:
        """Run ``code`` in the kernel, record it, and report what it did.

        ``timeout`` defaults to ``settings.cell_timeout``; a cell past it is
        interrupted, and the kernel restarted (then rebuilt) if the interrupt fails,
        exactly as in ``kernel-agent run``. ``provenance`` goes into the cell's
        metadata. The cell is in the transcript, marked ``running``, before it starts.
        """
        if not isinstance(code, str) or not code.strip():
            raise ConfigError("the code is empty")
        timeout = self.settings.cell_timeout if timeout is None else timeout
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"timeout must be positive, got {timeout:g}")
        self._started()
        requested = time.monotonic()
        await self._lock.acquire()
        try:
            work = asyncio.ensure_future(
                self._run_locked(code, timeout, provenance, on_output, requested)
            )
        except BaseException:
            self._lock.release()
            raise
        work.add_done_callback(lambda _: self._lock.release())
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if (
                not work.done()
            ):  # the caller gave up: stop the code; the cell is recorded when it ends
                self._spawn(self._interrupt_quietly())
                self._background.add(work)
                work.add_done_callback(self._background.discard)
            raise

    async def _run_locked(
        self,
        code: str,
        timeout: float | None,
        provenance: Mapping[str, Any] | None,
        on_output: OutputCallback | None,
        requested: float,
    ) -> CellRun:
        state = self._started()
        meta = {**(provenance or {}), "requested": _now_iso()}
        meta["wait_s"] = round(time.monotonic() - requested, 3)
        record = None
        async for item in state.run(code, timeout=timeout, meta=meta):
            if isinstance(item, CellRecord):
                record = item
            elif isinstance(item, CellOutput) and on_output is not None:
                on_output(item.output)
        assert record is not None
        view = state.view(record, vision=True)
        parsed = [p for p in map(from_data_url, view.images[:MAX_IMAGES]) if p is not None]
        images = await asyncio.to_thread(bound_images, parsed)  # as root: unprivileged
        return CellRun(record.result, record.index, view.text, images, record.change, record.note)

    async def run_task(
        self,
        task: str,
        *,
        settings: Settings | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Any]:
        """Run an agent on ``task`` in this session's kernel; yields its typed events.

        The agent works in this session's :class:`KernelState`: its cells, prose and
        answer go into the session's notebook (each cell with ``provenance`` and the
        task), its run's metadata into the notebook's ``runs``, and the cells that built
        the state before it stay replayable after a restart. The session's lock is held
        for the whole run, so cells sent meanwhile wait for it.
        """
        from .agent import AsyncAgent

        state = self._started()
        async with self._lock:
            origin = {**(provenance or {}), "task": task}
            agent = AsyncAgent(settings or self.settings, state=state, provenance=origin)
            try:
                async for event in agent.run(task):
                    yield event
            finally:
                await agent.close()

    async def variables(self) -> dict[str, VariableInfo]:
        """The kernel's namespace summary now (Python kernels), without running a numbered cell."""
        state = self._started()
        if not self.python:
            raise ConfigError("variables can only be listed in a Python kernel")
        async with self._lock:
            summary = await state.refresh_namespace()
        if summary is None:
            raise ConfigError("the kernel did not report its variables")
        return summary

    async def interrupt(self) -> None:
        """Interrupt the running cell, if any (the kernel and its state are kept)."""
        await self._started().executor.interrupt()

    async def _interrupt_quietly(self) -> None:
        try:
            if self.executor is not None:
                await self.executor.interrupt()
        except Exception:
            pass

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def restart(
        self, rebuild: bool = True, *, provenance: Mapping[str, Any] | None = None
    ) -> str:
        """Restart the kernel; with ``rebuild``, replay the cells that built its state.

        Returns a sentence saying what survived. The transcript marks the restart so
        the clean notebook starts again from the replayed cells.
        """
        state = self._started()
        async with self._lock:
            return await state.restart(rebuild, provenance=provenance)

    # ------------------------------------------------------------------ reading
    def notebook_text(self, clean: bool = False, budget: int = 40_000) -> str:
        """The cells run so far as text: sources, statuses and output summaries.

        ``clean`` shows the clean notebook (only the cells that built the current
        state, renumbered) instead of the full transcript.
        """
        transcript = self._recorded()
        nb = transcript.nb
        if clean:
            from .notebook.clean import clean_notebook

            nb = clean_notebook(nb)
        if not nb.cells:
            return "(no cells yet)"
        parts = [_cell_text(i, cell, 1500) for i, cell in enumerate(nb.cells)]
        return budget_text("\n\n".join(parts), budget)

    def cell_text(self, index: int) -> str:
        """Transcript cell ``index`` (as numbered by :meth:`notebook_text`), in full."""
        transcript = self._recorded()
        cells = transcript.cells
        if not isinstance(index, int) or not -len(cells) <= index < len(cells) or not cells:
            raise ConfigError(f"there is no cell {index}: the notebook has {len(cells)} cells")
        return _cell_text(index % len(cells), cells[index], self.settings.llm_output_chars * 4)

    def notebook_json(self) -> str:
        """The transcript as ``.ipynb`` JSON, exactly as written to disk."""
        transcript = self._recorded()
        return transcript.render()

    # --------------------------------------------------------- clean, verify, export
    def write_clean(self) -> Path:
        """Write the clean notebook beside the transcript (both linked); returns its path."""
        self._recorded()
        assert self.state is not None
        return self.state.write_clean()

    async def verify(self) -> VerifyReport:
        """Write the clean notebook and re-run it in a fresh kernel; returns the VerifyReport.

        The verdict is recorded in both notebooks' metadata.
        """
        return await self._started().verify(cwd=self.work_dir)

    async def export(self, to: str = "html", clean: bool = True) -> Path:
        """Export the clean notebook (or the transcript) to ``to``; returns the file written."""
        from .notebook.export import export_notebook

        transcript = self._recorded()
        source = self.write_clean() if clean else transcript.save()
        return await asyncio.to_thread(export_notebook, source, to)

    # -------------------------------------------------------------------- files
    @property
    def files(self) -> WorkDir:
        """The kernel's work dir as the file tools reach it: this host's directory, or a
        remote kernel's own (through its channels, :mod:`kernel_agent.workdir`)."""
        from .executors.gateway import AsyncGatewaySession

        if isinstance(self.executor, AsyncGatewaySession):
            remote = self.executor.files
            if remote is not None and remote.work is not None:
                return RemoteWorkDir(remote, lambda: self._lock)
        if self.executor is not None and self.executor.isolation.mode == "remote":
            raise ConfigError("this remote kernel's files cannot be reached (Python kernels only)")
        return LocalWorkDir(self.work_dir, self.view_dir)

    async def list_files(self, max_entries: int = 500) -> list[Entry]:
        """Entries in the work dir (links are reported, never followed)."""
        return await self.files.list(max_entries)

    async def read_file(self, path: str, limit: int = MAX_READ_BYTES) -> str:
        """Text file ``path`` (relative to the work dir), at most ``limit`` bytes."""
        data = await self.files.read(path, limit)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not a UTF-8 text file") from None

    async def write_file(self, path: str, content: str) -> int:
        """Write ``content`` to ``path`` in the work dir, atomically; returns the bytes written."""
        return await self.upload(path, _one(content.encode("utf-8")))

    async def upload(self, path: str, chunks: AsyncIterable[bytes], *, mode: int = 0o644) -> int:
        """Write the bytes of ``chunks`` to ``path`` in the work dir; returns the size.

        The file appears (atomically) only once every chunk has arrived: an exception
        raised by ``chunks`` (a size limit, a client gone) leaves no file behind.
        """
        return await self.files.write(path, chunks, mode)

    async def open_file(self, path: str) -> tuple[int, int]:
        """(fd, size) of the regular file ``path`` in the work dir (for a remote kernel, a
        private local copy, checked); the caller closes it."""
        return await self.files.open(path)

    async def delete_file(self, path: str) -> None:
        """Remove file ``path`` from the work dir (a link is removed, never followed)."""
        await self.files.delete(path)

    async def disk_usage(self) -> int:
        """Bytes in the regular files of the work dir (links not followed)."""
        return await self.files.usage()


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _cell_text(index: int, cell: NotebookNode, budget: int) -> str:
    """One notebook cell as text for a model: header, source, output summary."""
    meta = M.cell_meta(cell)
    if cell.cell_type != "code":
        return f"[{index}] {cell.cell_type}:\n{cell.source}"
    status = meta.get(M.STATUS) or (
        "error" if any(o.get("output_type") == "error" for o in cell.outputs) else "ok"
    )
    count = cell.get("execution_count")
    flags = " (replayed)" if meta.get(M.REPLAY) else ""
    head = f"[{index}] In [{count if count is not None else ' '}] {status}{flags}"
    stamp = datetime.now(timezone.utc)
    view = render_cell(
        CellResult(cell.source, "ok", count, list(cell.outputs), None, stamp, stamp), budget=budget
    )
    return f"{head}\n{cell.source}\n--- output ---\n{view.text}"
