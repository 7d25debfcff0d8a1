"""One kernel's state, owned in one place: :class:`KernelState`.

Whoever drives a kernel (the agent loop, a :class:`~kernel_agent.session.Session` for
the MCP server and the HTTP service) runs every cell through :meth:`KernelState.run`:

1. the code goes into the transcript, marked ``running``, before it starts;
2. the kernel runs it with the namespace probe as a ``user_expression`` (asked again
   with an empty cell after an error, which makes a kernel skip user expressions);
3. the caller's ``annotate`` hook adds its own keys (the agent: step, tokens, lever
   data), and the cell's record is written (:meth:`finish`);
4. the namespace change is described; after a restart the cells that built the state
   are replayed (:func:`.rebuild.rebuild_state`), else a cell that worked joins them.

The model's view of a cell has one format (:meth:`view`); the clean notebook and its
verification are here too. Like nbclient's one ``async_execute_cell`` with hooks, there
is no second path that records a cell.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NotebookError
from ..events import CellFinished, CellOutput, Event
from ..llm.view import CellView, render_cell
from ..notebook import cellmeta as M
from ..prompts import prompt
from ..results import CellResult
from .namespace import VariableInfo, describe, namespace_probe, parse_summary, probe_namespace
from .rebuild import Rebuild, rebuild_state

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ..executors.base import AsyncExecutor
    from ..notebook.transcript import Transcript
    from ..notebook.verify import VerifyReport
    from ..settings import Settings

__all__ = ["KernelState", "CellRecord", "Annotate", "RUNNING_SAVE_S"]

#: A running cell's code is on disk this long after it starts (or when it ends, if
#: sooner): a cell that takes milliseconds costs one notebook write, not two.
RUNNING_SAVE_S = 0.05

#: ``annotate(result, summary)``: the caller's keys for the cell's record, asked after the
#: cell ran and before the record is written (``summary``: the namespace it reported)
Annotate = Callable[[CellResult, "dict[str, VariableInfo] | None"], Mapping[str, Any]]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class CellRecord:
    """One cell that ran, as recorded: the result, its transcript cell and position,
    the namespace change (``new: x (int = 1)``) and the rebuild note after a restart."""

    result: CellResult
    cell: NotebookNode
    index: int
    change: str = ""
    note: str = ""


class KernelState:
    """An executor's kernel and everything known about it: the transcript, the namespace
    summary, the cells whose effects live in the kernel now, the last verification.

    ``namespace`` is what the kernel already holds (variables made before), so the first
    change described lists only what later cells did.
    """

    def __init__(
        self,
        executor: AsyncExecutor,
        transcript: Transcript,
        settings: Settings,
        *,
        namespace: Mapping[str, VariableInfo] | None = None,
    ) -> None:
        self.executor = executor
        self.transcript = transcript
        self.settings = settings
        #: the kernel's variables as last reported (Python kernels)
        self.namespace: dict[str, VariableInfo] = dict(namespace or {})
        #: (code, seconds) of the successful cells whose effects live in the kernel now
        self.state_cells: list[tuple[str, float]] = []
        #: (transcript cells, report) of the last verification
        self._verified: tuple[int, VerifyReport] | None = None
        #: the probe for this kernel's language (None: not Python), asked with every cell
        self._probe = namespace_probe(executor.language_info)

    @property
    def python(self) -> bool:
        return self.executor.language_info.get("name") == "python"

    @property
    def work_dir(self) -> Path:
        """Where the kernel's code runs: its private work dir, else the settings' cwd."""
        work = self.executor.kernel_cwd
        return Path(work or self.settings.cwd or Path.cwd()).resolve()

    # ------------------------------------------------------------ the one writer
    def note(self, text: str, role: str = M.ROLE_NOTE, **extra: Any) -> NotebookNode:
        """A markdown cell with its ``role`` (task, prose, note, briefing, answer)."""
        cell = self.transcript.add_markdown(text, {M.ROLE: role, **extra})
        self.transcript.freeze(cell)  # never edited again: serialised once
        return cell

    def skipped(self, code: str, **extra: Any) -> NotebookNode:
        """A code cell that did not run (the user or a lever skipped it)."""
        return self.transcript.add_code(code, None, {M.STATUS: M.SKIPPED, **extra})

    def begin(self, code: str, *, save: bool = True, **extra: Any) -> NotebookNode:
        """The code of a cell about to run, marked ``running`` (kept if the run ends in it).

        ``save=False``: not written yet (:meth:`run` writes it :data:`RUNNING_SAVE_S` later).
        """
        meta = {M.STATUS: M.RUNNING, **extra}
        return self.transcript.add_code(code, None, meta, save=save)

    def finish(self, pending: NotebookNode, result: CellResult, **extra: Any) -> None:
        """Fill ``pending`` (from :meth:`begin`): outputs, count, and its record."""
        meta = {
            **M.cell_meta(pending),
            **extra,
            M.STATUS: result.status,
            M.RESTARTED: result.restarted,
            M.STARTED: result.started.isoformat(timespec="milliseconds"),
            M.ENDED: result.ended.isoformat(timespec="milliseconds"),
            M.EXEC_S: round(result.duration, 3),
        }
        self.transcript.finish_code(pending, result, meta)

    def _save_quietly(self) -> None:
        """The running cell's code to disk (a failure shows when the cell is recorded)."""
        with contextlib.suppress(NotebookError):
            self.transcript.save()

    def interrupted(self, pending: NotebookNode) -> None:
        """The run ended while ``pending`` ran."""
        self.transcript.mark(pending, M.INTERRUPTED)

    def replayed(self, result: CellResult) -> None:
        """A cell replayed to rebuild the state after a restart."""
        meta = {M.STATUS: result.status, M.REPLAY: True, M.EXEC_S: round(result.duration, 3)}
        self.transcript.freeze(self.transcript.add_code(result.code, result, meta))

    # ---------------------------------------------------------------- running
    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Any = None,
        expressions: Mapping[str, str] | None = None,
    ) -> CellResult:
        """Run ``code`` with the namespace probe (and, in a Python kernel, the caller's
        ``expressions``, answered in ``user_expressions``); nothing is recorded.

        A cancelled caller (Ctrl-C, a client gone) interrupts the code in the kernel.
        """
        probe = {**dict(expressions or {}), **self._probe} if self._probe else None
        task = asyncio.ensure_future(
            self.executor.execute(
                code,
                timeout=self.settings.cell_timeout if timeout is None else timeout,
                on_output=on_output,
                user_expressions=probe,
            )
        )
        try:
            result = await asyncio.shield(task)
        except BaseException:
            if not task.done():  # cancelled mid-cell: stop the code in the kernel too
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self.executor.interrupt())
                with contextlib.suppress(BaseException):
                    await task
            raise
        if self._probe and result.status == "error" and not result.user_expressions:
            # skipped after an error: asked again, so the caller learns what the cell defined
            result.user_expressions = await probe_namespace(self.executor)
        return result

    async def _stream(
        self, code: str, step: int, timeout: float | None, expressions: Mapping[str, str] | None
    ) -> AsyncIterator[CellOutput | CellResult]:
        """:meth:`execute`, yielding a CellOutput per output as it comes, then the result."""
        queue: asyncio.Queue[CellOutput] = asyncio.Queue()
        task = asyncio.ensure_future(
            self.execute(
                code,
                timeout=timeout,
                on_output=lambda out: queue.put_nowait(CellOutput(step, out)),
                expressions=expressions,
            )
        )
        try:
            while not task.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
        finally:
            if not task.done():
                task.cancel()  # execute() interrupts the kernel
                with contextlib.suppress(BaseException):
                    await task
        yield task.result()

    async def run(
        self,
        code: str,
        *,
        step: int = 0,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        annotate: Annotate | None = None,
        expressions: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Event | CellRecord]:
        """Record, run and settle one cell: yields CellOutput events as they come,
        CellFinished once it is recorded, a rebuild's events after a restart, and last
        its :class:`CellRecord`.

        ``step`` (the agent's, if not 0) and ``meta`` (provenance) go into the cell's
        record from the start; ``annotate`` adds keys once it ran. ``timeout`` defaults
        to the settings'; ``expressions`` go to :meth:`execute`.
        """
        first = {M.STEP: step} if step else {}
        pending = self.begin(code, save=False, **first, **dict(meta or {}))
        index = len(self.transcript.cells) - 1
        write = asyncio.get_running_loop().call_later(RUNNING_SAVE_S, self._save_quietly)
        result: CellResult | None = None
        try:
            async for item in self._stream(code, step, timeout, expressions):
                if isinstance(item, CellResult):
                    result = item
                else:
                    yield item
        except BaseException:  # the run ends in this cell
            self.interrupted(pending)
            raise
        finally:
            write.cancel()
        assert result is not None
        summary = parse_summary(result.user_expressions.get("ns"))
        self.finish(pending, result, **(annotate(result, summary) if annotate else {}))
        yield CellFinished(step, result)
        record = CellRecord(result, pending, index)
        async for event in self._settle(record, summary):
            yield event
        yield record

    async def _settle(
        self, record: CellRecord, summary: dict[str, VariableInfo] | None
    ) -> AsyncIterator[Event]:
        """The namespace change; after a restart, the rebuild; else the state cells grow."""
        result = record.result
        before = dict(self.namespace)
        if summary is not None:
            record.change = describe({} if result.restarted else self.namespace, summary)
            self.namespace = summary
        if result.restarted:
            rebuild = Rebuild()
            async for event in rebuild_state(self, before, rebuild):
                yield event
            self.namespace, record.note = rebuild.namespace, rebuild.note
        elif result.ok:
            self.state_cells.append((result.code, result.duration))

    async def restart(
        self, rebuild: bool = True, *, provenance: Mapping[str, Any] | None = None
    ) -> str:
        """Restart the kernel; with ``rebuild``, replay the cells that built its state.

        A marker cell records the restart (the clean notebook starts again after it).
        Returns the sentence that says what survived.
        """
        before = dict(self.namespace)
        await self.executor.restart()
        self.namespace = {}
        marker = {M.STATUS: M.RESTART, M.RESTARTED: True, **(provenance or {})}
        marker["requested"] = now_iso()
        self.transcript.freeze(self.transcript.add_code("# kernel restarted", None, marker))
        out = Rebuild()
        async for _ in rebuild_state(self, before, out, replay=rebuild):
            pass
        self.namespace = out.namespace
        return out.note

    async def refresh_namespace(self) -> dict[str, VariableInfo] | None:
        """Ask the kernel for its variables now, without a numbered cell (None: no answer)."""
        summary = parse_summary((await probe_namespace(self.executor)).get("ns"))
        if summary is not None:
            self.namespace = summary
        return summary

    # ------------------------------------------------------------ the model's view
    def view(self, record: CellRecord, *, hint: str = "", vision: bool | None = None) -> CellView:
        """What the model reads of a cell: its outputs within the settings' budget, the
        error ``hint``, the namespace change, and the rebuild note. Images are included
        when ``vision`` (default: the settings') is on."""
        result = record.result
        seen = render_cell(
            result,
            budget=self.settings.llm_output_chars,
            vision=self.settings.vision if vision is None else vision,
        )
        body = seen.text + (f"\n{hint}" if hint else "")
        if record.change:
            body += f"\nVariables {record.change}"
        text = prompt(
            "cell_output",
            count=result.execution_count if result.execution_count is not None else "?",
            status=result.status,
            body=body,
        )
        if record.note:
            text += f"\n{record.note}"
        return CellView(text, seen.images)

    # ------------------------------------------------------- clean and verify
    def write_clean(self) -> Path:
        """Write the clean notebook beside the transcript (each links the other); its path.

        A verdict still holds when no cell was added since: it is recorded again.
        """
        from ..notebook.clean import clean_path_for, write_pair

        transcript = self.transcript
        _, clean = write_pair(transcript, transcript.path, clean_path_for(transcript.path))
        if self._verified is not None and self._verified[0] == len(transcript.cells):
            from ..notebook.verify import record_verdict

            record_verdict(clean, self._verified[1])
        return clean

    async def verify(self, *, cwd: Path | None = None, install: Any = "never") -> VerifyReport:
        """Write the clean notebook and re-run it in a fresh kernel of the same kind.

        ``cwd`` is where that kernel runs (default: this kernel's work dir, so it sees
        what this one saw); ``install`` what it may install. The verdict goes into both
        notebooks' metadata.
        """
        from ..notebook.verify import async_verify_notebook, record_verdict

        clean = self.write_clean()
        report = await async_verify_notebook(
            clean,
            timeout=self.settings.cell_timeout,
            cwd=cwd or self.work_dir,
            env_passthrough=self.settings.env_passthrough,
            launcher=self.executor.make_launcher(),
            install=install,
        )
        record_verdict(clean, report)
        self.transcript.update_run_metadata(verify=report.to_metadata())
        self._verified = (len(self.transcript.cells), report)
        return report
