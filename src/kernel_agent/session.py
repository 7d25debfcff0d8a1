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
import os
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, NotebookError, UnsafePath
from .executors.base import AsyncExecutor, Isolation, OutputCallback
from .images import BoundedImage, bound_image, from_data_url
from .llm.view import budget_text, render_cell
from .namespace import VariableInfo, describe, namespace_probe, parse_summary, probe_namespace
from .notebook.transcript import Transcript
from .rebuild import Rebuild, rebuild_state
from .results import CellResult
from .safefs import (
    Entry,
    list_beneath,
    open_beneath,
    read_beneath,
    remove_beneath,
    write_beneath,
    write_stream_beneath,
)
from .settings import Settings

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

    ``text`` is the model's view (budgeted outputs, clean traceback, the namespace
    change and any rebuild note); ``images`` are bounded copies of the cell's images;
    ``index`` is the cell's position in the transcript.
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
        self.transcript: Transcript | None = None
        self._metadata = dict(metadata or {})
        self._namespace: dict[str, VariableInfo] = {}
        #: (code, seconds) of the successful cells whose effects live in the kernel now
        self._state_cells: list[tuple[str, float]] = []
        self._lock = asyncio.Lock()
        self._clients: list[dict[str, Any]] = []
        self._background: set[asyncio.Future[Any]] = set()
        #: (transcript cells, report) of the last verification
        self._verified: tuple[int, VerifyReport] | None = None

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start the kernel and open the transcript (idempotent)."""
        if self.executor is None:
            from .executors.factory import make_executor

            self.executor = make_executor(self.settings)
        self.isolation = self.executor.isolation
        if not self.executor.language_info:
            await self.executor.start()
        if self.transcript is None:
            self.transcript = Transcript(
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
            self.transcript.save()

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

    def _started(self) -> tuple[AsyncExecutor, Transcript]:
        if self.executor is None or self.transcript is None:
            raise ConfigError("the session is not started")
        return self.executor, self.transcript

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
        executor, transcript = self._started()
        meta: dict[str, Any] = {"status": "running", **(provenance or {}), "requested": _now_iso()}
        meta["wait_s"] = round(time.monotonic() - requested, 3)
        cell = transcript.add_code(code, None, meta)
        index = len(transcript.cells) - 1
        expressions = namespace_probe(executor.language_info)
        result = await executor.execute(
            code, timeout=timeout, on_output=on_output, user_expressions=expressions
        )
        if expressions and result.status == "error" and not result.user_expressions:
            result.user_expressions = await probe_namespace(executor)
        cell.outputs = list(result.outputs)
        cell.execution_count = result.execution_count
        meta.update(
            status=result.status,
            restarted=result.restarted,
            started=result.started.isoformat(timespec="milliseconds"),
            ended=result.ended.isoformat(timespec="milliseconds"),
            exec_s=round(result.duration, 3),
        )
        cell.metadata["kernel_agent"] = meta
        transcript.save()
        transcript.freeze(cell)

        before = dict(self._namespace)
        summary = parse_summary(result.user_expressions.get("ns"))
        change = ""
        if summary is not None:
            change = describe({} if result.restarted else self._namespace, summary)
            self._namespace = summary
        note = ""
        if result.restarted:
            rebuild = Rebuild()
            async for _ in rebuild_state(
                self._state_cells, executor, transcript, self.settings, before, rebuild
            ):
                pass
            self._namespace, note = rebuild.namespace, rebuild.note
        elif result.ok:
            self._state_cells.append((code, result.duration))
        view = render_cell(result, budget=self.settings.llm_output_chars, vision=True)
        images = []
        for url in view.images[:MAX_IMAGES]:
            parsed = from_data_url(url)
            bounded = bound_image(*parsed) if parsed else None
            if bounded is not None:
                images.append(bounded)
        count = result.execution_count if result.execution_count is not None else " "
        text = f"In [{count}] {result.status} ({result.duration:.2f} s)\n{view.text}"
        if change:
            text += f"\nVariables {change}"
        if note:
            text += f"\n{note}"
        return CellRun(result, index, text, images, change, note)

    def _record_agent_cell(self, result: CellResult, provenance: Mapping[str, Any]) -> None:
        """Add a cell an agent run executed to the transcript, and to the state to rebuild."""
        _, transcript = self._started()
        meta = {
            "status": result.status,
            **provenance,
            "restarted": result.restarted,
            "started": result.started.isoformat(timespec="milliseconds"),
            "ended": result.ended.isoformat(timespec="milliseconds"),
            "exec_s": round(result.duration, 3),
        }
        transcript.freeze(transcript.add_code(result.code, result, meta))
        if result.restarted:
            self._state_cells.clear()  # the agent rebuilt what it knew of; the rest is gone
        elif result.ok:
            self._state_cells.append((result.code, result.duration))

    async def run_task(
        self,
        task: str,
        *,
        notebook: str | Path,
        settings: Settings | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Any]:
        """Run an agent on ``task`` in this session's kernel; yields its typed events.

        The run keeps its own notebook (``notebook``: the task, the model's prose, the
        run's metadata); each cell it executes is also recorded in the session's
        transcript, with ``provenance``, as it finishes. The session's lock is held for
        the whole run, so cells sent meanwhile wait for it.
        """
        from .agent import AsyncAgent
        from .events import CellFinished

        self._started()
        meta = {**(provenance or {}), "task": task}
        async with self._lock:
            agent = AsyncAgent(
                settings or self.settings, executor=self.executor, notebook=notebook,
                namespace=dict(self._namespace),
            )  # fmt: skip
            try:
                async for event in agent.run(task):
                    if isinstance(event, CellFinished):
                        self._record_agent_cell(event.result, meta)
                    yield event
            finally:
                await agent.close()
            if self.python and self.executor is not None:  # the agent changed the namespace
                try:
                    answer = await probe_namespace(self.executor)
                    self._namespace = parse_summary(answer.get("ns")) or self._namespace
                except Exception:  # noqa: BLE001 - a summary is a nicety
                    pass

    async def variables(self) -> dict[str, VariableInfo]:
        """The kernel's namespace summary now (Python kernels), without running a numbered cell."""
        executor, _ = self._started()
        if not self.python:
            raise ConfigError("variables can only be listed in a Python kernel")
        async with self._lock:
            answer = await probe_namespace(executor)
        summary = parse_summary(answer.get("ns"))
        if summary is None:
            raise ConfigError("the kernel did not report its variables")
        self._namespace = summary
        return summary

    async def interrupt(self) -> None:
        """Interrupt the running cell, if any (the kernel and its state are kept)."""
        executor, _ = self._started()
        await executor.interrupt()

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
        executor, transcript = self._started()
        async with self._lock:
            before = dict(self._namespace)
            await executor.restart()
            self._namespace = {}
            marker = {
                "status": "restart",
                "restarted": True,
                **(provenance or {}),
                "requested": _now_iso(),
            }
            transcript.freeze(transcript.add_code("# kernel restarted", None, marker))
            out = Rebuild()
            settings = self.settings if rebuild else replace(self.settings, rebuild_state=False)
            async for _ in rebuild_state(
                self._state_cells, executor, transcript, settings, before, out
            ):
                pass
            self._namespace = out.namespace
            return out.note

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
        from .notebook.clean import clean_path_for, write_pair

        transcript = self._recorded()
        _, clean = write_pair(transcript, transcript.path, clean_path_for(transcript.path))
        if self._verified is not None and self._verified[0] == len(transcript.cells):
            from .notebook.verify import record_verdict

            record_verdict(clean, self._verified[1])  # nothing ran since: the verdict still holds
        return clean

    async def verify(self) -> VerifyReport:
        """Write the clean notebook and re-run it in a fresh kernel; returns the VerifyReport.

        The verdict is recorded in both notebooks' metadata.
        """
        from .notebook.verify import async_verify_notebook, record_verdict

        executor, transcript = self._started()
        clean = self.write_clean()
        report = await async_verify_notebook(
            clean,
            timeout=self.settings.cell_timeout,
            cwd=self.work_dir,
            env_passthrough=self.settings.env_passthrough,
            launcher=executor.make_launcher(),
        )
        record_verdict(clean, report)
        transcript.update_run_metadata(verify=report.to_metadata())
        self._verified = (len(transcript.cells), report)
        return report

    async def export(self, to: str = "html", clean: bool = True) -> Path:
        """Export the clean notebook (or the transcript) to ``to``; returns the file written."""
        from .notebook.export import export_notebook

        transcript = self._recorded()
        source = self.write_clean() if clean else transcript.save()
        return await asyncio.to_thread(export_notebook, source, to)

    # -------------------------------------------------------------------- files
    def list_files(self, max_entries: int = 500) -> list[Entry]:
        """Entries in the work dir (links are reported, never followed)."""
        return list_beneath(self.work_dir, max_entries=max_entries)

    def read_file(self, path: str, limit: int = MAX_READ_BYTES) -> str:
        """Text file ``path`` (relative to the work dir), at most ``limit`` bytes."""
        try:
            try:
                data = read_beneath(self.work_dir, path, limit=limit)
            except UnsafePath as exc:
                if "symlink" not in str(exc) or self.view_dir == self.work_dir:
                    raise
                # the work dir links the user's files: read those from the user's dir
                # itself (never through the link, which the kernel could have replaced)
                try:
                    data = read_beneath(self.view_dir, path, limit=limit)
                except FileNotFoundError:
                    raise exc from None  # a link the kernel made: not the user's file
        except FileNotFoundError:
            raise ConfigError(f"no such file in the work dir: {path}") from None
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None
        except UnsafePath as exc:
            if "larger than" in str(exc):
                raise ConfigError(
                    f"{path} is larger than {limit // 1024} KB; read it from a cell instead"
                ) from None
            raise
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not a UTF-8 text file") from None

    def write_file(self, path: str, content: str) -> int:
        """Write ``content`` to ``path`` in the work dir, atomically; returns the bytes written."""
        data = content.encode("utf-8")
        try:
            write_beneath(self.work_dir, path, data, mode=0o644)
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None
        except NotADirectoryError:
            raise UnsafePath(f"{path}: a parent is not a directory") from None
        return len(data)

    async def upload(self, path: str, chunks: AsyncIterable[bytes], *, mode: int = 0o644) -> int:
        """Write the bytes of ``chunks`` to ``path`` in the work dir; returns the size.

        The file appears (atomically) only once every chunk has arrived: an exception
        raised by ``chunks`` (a size limit, a client gone) leaves no file behind.
        """
        size = 0
        try:
            with write_stream_beneath(self.work_dir, path, mode=mode) as fh:
                async for chunk in chunks:
                    fh.write(chunk)
                    size += len(chunk)
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None
        except NotADirectoryError:
            raise UnsafePath(f"{path}: a parent is not a directory") from None
        return size

    def open_file(self, path: str, root: Path | None = None) -> tuple[int, int]:
        """(fd, size) of the regular file ``path`` in the work dir (or ``root``); the caller
        closes it."""
        try:
            fd = open_beneath(root or self.work_dir, path)
        except FileNotFoundError:
            raise ConfigError(f"no such file in the work dir: {path}") from None
        return fd, os.fstat(fd).st_size

    def delete_file(self, path: str) -> None:
        """Remove file ``path`` from the work dir (a link is removed, never followed)."""
        try:
            remove_beneath(self.work_dir, path)
        except FileNotFoundError:
            raise ConfigError(f"no such file in the work dir: {path}") from None
        except IsADirectoryError:
            raise ConfigError(f"{path} is a directory") from None

    def disk_usage(self) -> int:
        """Bytes in the regular files of the work dir (links not followed)."""
        return sum(
            e.size
            for e in list_beneath(self.work_dir, max_entries=100_000, max_depth=32)
            if e.kind == "file"
        )


def _cell_text(index: int, cell: NotebookNode, budget: int) -> str:
    """One notebook cell as text for a model: header, source, output summary."""
    meta = cell.get("metadata", {}).get("kernel_agent") or {}
    if cell.cell_type != "code":
        return f"[{index}] {cell.cell_type}:\n{cell.source}"
    status = meta.get("status") or (
        "error" if any(o.get("output_type") == "error" for o in cell.outputs) else "ok"
    )
    count = cell.get("execution_count")
    flags = " (replayed)" if meta.get("replay") else ""
    head = f"[{index}] In [{count if count is not None else ' '}] {status}{flags}"
    stamp = datetime.now(timezone.utc)
    view = render_cell(
        CellResult(cell.source, "ok", count, list(cell.outputs), None, stamp, stamp), budget=budget
    )
    return f"{head}\n{cell.source}\n--- output ---\n{view.text}"
