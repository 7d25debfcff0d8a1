"""The agent loop: the model writes a cell, the kernel runs it, the model reads the outputs.

:class:`AsyncAgent.run` is an async generator of typed events (see :mod:`kernel_agent.events`);
nothing here prints. :class:`~.blocking.Agent` is its blocking face.

The loop is mechanism only: generate (:mod:`.reply`), parse (the :mod:`.protocols`),
approve, then run and record each cell through the kernel's
:class:`~kernel_agent.kernel_state.KernelState` (the one path every front end uses).
The small-model policies are :mod:`.levers` it consults at named points (fresh each task;
what they share is on the run's :class:`~.state.TaskState`); the messages live in one
:class:`~.history.History`. The end of a run is :mod:`.handover`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..events import (
    Answer,
    CellSkipped,
    CellStarted,
    Event,
    ModelReply,
    Notice,
    RunFinished,
    RunResult,
    RunStarted,
    Usage,
)
from ..executors.base import AsyncExecutor
from ..kernel_state import CellRecord, KernelState
from ..kernel_state.namespace import VariableInfo
from ..llm.client import LLMClient, choose_protocol, should_fall_back_to_fenced
from ..llm.endpoint import Endpoint, open_endpoint
from ..llm.stream import Completion
from ..notebook import cellmeta as M
from ..notebook.transcript import Transcript
from ..results import CellResult
from ..settings import Settings
from ..syncify import call_in_consumer
from ..tools.host import HostSide
from . import hints
from .answering import compose_answer, finish_answer, settle_answer, start_afresh, start_over
from .briefing import briefing_cell, probe_libraries, prompt_cwd, system_prompt
from .budget import Budget, BudgetStop, found_so_far, stop_or_extend, stopped_answer
from .handover import hand_over, remote_files, summarise
from .history import History
from .levers import levers_for
from .levers.base import Lever, first_decision, first_rewrite, probes
from .protocols import FencedProtocol, Protocol, make_protocol
from .reply import stream_reply
from .state import Stop, TaskState, Turn
from .tracing import make_tracer

__all__ = ["AsyncAgent", "default_notebook_path"]

#: ``approve(code, step)`` returns ("run", code) (the code possibly edited), ("skip", None)
#: or ("quit", None).
ApproveFn = Callable[[str, int], "tuple[str, str | None] | str"]
#: ``extend(stop)`` is asked when a budget would stop the run: True raises that budget
ExtendFn = Callable[[BudgetStop], bool]


#: the reply length for the bundled model when ``max_tokens`` is not set: a cell or an
#: answer fits; a reply cut there is noticed (``finish_reason == "length"``)
LOCAL_MAX_TOKENS = 1024


def default_notebook_path(settings: Settings, task: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:40] or "run"
    return settings.notebook_dir / f"{stamp}-{slug}.ipynb"


class AsyncAgent:
    """An LLM working in one kernel. Reusable across tasks (interactive chat).

    ``executor`` defaults to a local (sandboxed) kernel built from ``settings``;
    ``approve`` is asked before each cell runs (and before a package install under
    ``--install ask``); ``extend`` when a budget would stop the run (see :mod:`.budget`);
    ``namespace`` is a summary of the variables the executor's kernel already holds (see
    :mod:`kernel_agent.kernel_state.namespace`). ``state`` is a kernel's
    :class:`~kernel_agent.kernel_state.KernelState` to work in (a session's: its
    executor, transcript and state cells; ``provenance`` then goes into each cell's
    record); by default the agent makes its own at start. ``tools`` are host functions
    the kernel's code may call with ``call_tool`` (see :mod:`kernel_agent.tools`). Runs
    are traced when ``settings.trace`` is set or an OpenTelemetry ``tracer_provider`` is
    given (see :mod:`kernel_agent.agent.tracing`).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        executor: AsyncExecutor | None = None,
        notebook: str | Path | None = None,
        approve: ApproveFn | None = None,
        extend: ExtendFn | None = None,
        namespace: dict[str, VariableInfo] | None = None,
        tools: Sequence[Callable[..., Any]] = (),
        tracer_provider: Any = None,
        state: KernelState | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        #: host tools, set_result and install_package for the kernel's code
        self.host = HostSide(self.settings, tools, ask_install=self._ask_install)
        #: the kernel's state: its transcript, namespace, state cells (made at start)
        self.state = state
        self.executor = state.executor if state is not None else executor
        self._own_executor = self.executor is None
        #: keys every cell's record gets (where the run came from)
        self.provenance = dict(provenance or {})
        #: this run's entry in a borrowed transcript's ``runs`` (its own metadata)
        self._run_entry: dict[str, Any] | None = None
        self._attached = False
        self.notebook_path = Path(notebook) if notebook else None
        self.approve = approve
        self.extend = extend
        self.history = History()
        self.cells: list[CellResult] = []
        self.usage = Usage(source="")
        #: the levers as configured; each task runs fresh copies (:meth:`Lever.for_task`)
        self.levers: list[Lever] = levers_for(self.settings, self.host.result_missing)
        self._tracer = make_tracer(self.settings, tracer_provider, lambda: self.history.messages)
        #: the isolation's warning is said once per agent, not once per task
        self._warned = False
        #: what the kernel holds already (``namespace``: variables the user made before
        #: the run), so the note after the first cell lists only what the model changed
        self._namespace_before: dict[str, VariableInfo] = dict(namespace or {})
        self._endpoint_cm: contextlib.AbstractAsyncContextManager[Endpoint] | None = None
        self.endpoint: Endpoint | None = None
        self._llm: LLMClient | None = None
        self.protocol: Protocol = FencedProtocol()
        self._step = 0
        #: what the kernel can import, probed once at start (``{import name: version}``)
        self.libraries: dict[str, str] = {}
        self._libraries_note = ""

    @property
    def transcript(self) -> Transcript | None:
        """The run's notebook (the borrowed state's, if one was given)."""
        return self.state.transcript if self.state is not None else None

    @property
    def messages(self) -> Sequence[dict[str, Any]]:
        """The conversation so far (read only: :attr:`history` edits it)."""
        return self.history.messages

    # ---------------------------------------------------------------- lifecycle
    async def start(self, task: str = "") -> None:
        """Start the model endpoint, the kernel and the transcript (idempotent).

        The model server and the kernel start concurrently; if either fails, both stop.
        """
        if self.executor is None:
            from ..executors.factory import make_executor

            self.executor = make_executor(self.settings)
        fresh = not self.executor.language_info
        if fresh:
            self.host.prepare(self.executor)
        starting = []
        if self.endpoint is None:
            starting.append(self._open_endpoint())
        if not self.executor.language_info:
            starting.append(self.executor.start())
        failures = [
            r
            for r in await asyncio.gather(*starting, return_exceptions=True)
            if isinstance(r, BaseException)
        ]
        if failures:
            await self.close()
            raise failures[0]
        first = not self._attached
        if first:
            await self.host.attach(self.executor, self._language())
        self.protocol.language = self._language()
        assert self.endpoint is not None
        if first:
            self._attached = True
            self.libraries, self._libraries_note = await probe_libraries(self.executor)
            metadata = {
                "model": self.endpoint.label,
                "protocol": self.protocol.name,
                "sandbox": self.executor.isolation.to_metadata(),
                "started": _now_iso(),
                **self.host.run_metadata(),
            }
            if self.state is None:
                path = self.notebook_path or default_notebook_path(self.settings, task)
                transcript = Transcript(
                    path,
                    kernelspec=self.executor.kernelspec,
                    language_info=self.executor.language_info,
                    metadata=metadata,
                )
                self.state = KernelState(
                    self.executor, transcript, self.settings, namespace=self._namespace_before
                )
            else:  # a session's transcript: this run's metadata is one entry of its runs
                self._run_entry = metadata
                self.state.transcript.run_metadata.setdefault("runs", []).append(metadata)
            self.history.set_system(self._system_prompt())

    async def _open_endpoint(self) -> None:
        manager = open_endpoint(self.settings)
        self.endpoint = await manager.__aenter__()
        self._endpoint_cm = manager
        ep = self.endpoint
        llm_settings = self.settings.with_(base_url=ep.base_url, api_key=ep.api_key, model=ep.model)
        if ep.local and llm_settings.max_tokens is None:  # a rambling reply costs minutes here
            llm_settings = llm_settings.with_(max_tokens=LOCAL_MAX_TOKENS)
        self._llm = LLMClient(llm_settings)
        name = choose_protocol(self.settings, ep.model if not ep.local else "local")
        self.protocol = make_protocol(name, self._language())

    async def close(self) -> None:
        """Stop the kernel (if this agent started it), the HTTP client and the local model."""
        llm, self._llm = self._llm, None
        if llm is not None:
            with contextlib.suppress(Exception):
                await llm.aclose()
        executor, self.executor = self.executor, None
        if executor is not None and self._own_executor:
            with contextlib.suppress(Exception):
                await executor.shutdown()
        self.host.close()
        cm, self._endpoint_cm, self.endpoint = self._endpoint_cm, None, None
        if cm is not None:
            await cm.__aexit__(None, None, None)
        if self._tracer is not None:
            self._tracer.close()

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _system_prompt(self) -> str:
        assert self.executor is not None
        return system_prompt(
            self.settings,
            self.executor,
            self.protocol.name,
            self._libraries_note,
            self.host.prompt_section(),
            self._prompt_cwd(),
        )

    # --------------------------------------------------------------------- run
    async def run(self, task: str) -> AsyncIterator[Event]:
        """Work on ``task`` until the model answers; yields events as they happen."""
        tracer = self._tracer
        async with contextlib.aclosing(self._run(task)) as events:  # closed when we are
            try:
                async for event in events:
                    if tracer is not None:
                        tracer.on(event)
                    yield event
            except BaseException as exc:
                if tracer is not None:
                    tracer.fail(exc)
                raise

    def _run_meta(self, **values: Any) -> None:
        """The run's own metadata: the notebook's, or its entry in a borrowed one's runs."""
        assert self.state is not None
        if self._run_entry is None:
            self.state.transcript.update_run_metadata(**values)
        else:
            self._run_entry.update(values)
            self.state.transcript.save()

    async def _run(self, task: str) -> AsyncGenerator[Event, None]:
        task = task.strip()
        if not task:
            raise ConfigError("the task is empty")
        await self.start(task)
        assert self.transcript is not None and self.executor is not None
        assert self.endpoint is not None and self.state is not None
        budget = Budget(self.settings, self.endpoint.model, local=self.endpoint.local)
        started = time.monotonic()
        first_cell = len(self.cells)
        isolation = self.executor.isolation
        result = RunResult(
            answer="", status="error", notebook=self.transcript.path, isolation=isolation.mode
        )
        self.state.note(f"**Task:** {task}", M.ROLE_TASK)
        self._run_meta(task=task)
        yield RunStarted(
            task,
            self.endpoint.label,
            self.protocol.name,
            self.transcript.path,
            isolation.note,
            kernel=str(self.executor.kernelspec.get("name", "")),
            base_url=self.endpoint.base_url or "",
        )
        if isolation.warning and not self._warned:
            yield Notice(isolation.warning, "warning")
            self._warned = True  # once per agent, not per task
        state = TaskState(task, step=self._step, libraries=self.libraries, budget=budget)
        state.namespace = dict(self.state.namespace)
        levers = self._task_levers = [lever.for_task() for lever in self.levers]
        notes = [n for n in [await lever.task_note(state, self.executor) for lever in levers] if n]
        if notes:
            self.state.note("\n\n".join(briefing_cell(n) for n in notes), M.ROLE_BRIEFING)
            state.told.extend(notes)
            state.briefing = notes
        self.history.user("\n\n".join([task, *notes]))
        state.history_start = len(self.history)
        try:
            async for event in self._loop(state, result):
                yield event
        except (asyncio.CancelledError, KeyboardInterrupt):
            result.status, result.answer = "interrupted", result.answer or "(interrupted)"
            raise
        finally:
            result.cells, result.usage = self.cells[first_cell:], self.usage
            result.duration_s = time.monotonic() - started
            self._run_meta(
                **summarise(result, budget), ended=_now_iso(), **self.host.run_metadata()
            )
        async for event in hand_over(
            result,
            state=self.state,
            host=self.host,
            settings=self.settings,
            work_dir=self._work_dir(),
            run_meta=self._run_meta,
        ):
            yield event
        yield Answer(result.answer)
        yield RunFinished(result)

    def _prompt_cwd(self) -> str:
        remote = remote_files(self.executor)
        return prompt_cwd(self.executor, remote.work if remote else None, self._work_dir())

    def _work_dir(self) -> Path:
        """Where the kernel's code runs (a remote kernel's: ours, as the settings say)."""
        work = self.executor.kernel_cwd if self.executor is not None else None
        return work or Path(self.settings.cwd or Path.cwd())

    async def _loop(self, st: TaskState, result: RunResult) -> AsyncIterator[Event]:
        """Turns until an answer, a stop or a bound; then the answer goes into the transcript."""
        settings, state = self.settings, self.state
        assert state is not None
        while result.status == "error":  # "error" until a turn settles it
            if st.steps >= settings.max_steps:
                result.status = "max_steps"
                result.answer = found_so_far(
                    f"Stopped after {st.steps} steps without a final answer "
                    f"(--max-steps {settings.max_steps}).",
                    st.cells,
                )
                break
            stop = await stop_or_extend(st.budget, self.extend)
            if stop is not None:
                result.status, result.answer = "budget", stopped_answer(stop, st.cells)
                break
            async for event in self._turn(st, result):
                yield event
            if result.status == "error" and st.failures >= settings.max_consecutive_errors:
                if (notice := start_over(self._task_levers, state, self.history, st)) is not None:
                    yield notice
                    continue
                result.status = "failed"
                result.answer = (
                    f"Gave up after {st.failures} failing cells in a row; "
                    f"the last error was: {self.cells[-1].error}"
                )
        self._step = st.step
        meta, notice = finish_answer(st, result)
        state.note(result.answer, M.ROLE_ANSWER, **meta)
        if notice is not None:
            yield notice

    async def _turn(self, st: TaskState, result: RunResult) -> AsyncIterator[Event]:
        """One reply and the cells it asks for; sets ``result`` when the run is settled."""
        assert self.state is not None
        gen_started = time.monotonic()
        completion = None
        async for item in self._generate(st.sampling, st.step + 1):
            if isinstance(item, Completion):
                completion = item
            else:
                yield item
        gen_s = time.monotonic() - gen_started
        result.model_time_s += gen_s
        assert completion is not None
        if completion.usage is not None:
            self.usage = self.usage + completion.usage
        if st.budget is not None:
            st.budget.record(completion.usage, gen_s)
        turn = self.protocol.parse(completion)
        for lever in self._task_levers:
            lever.after_reply(st, turn)
        self.protocol.remember(self.history, completion, turn)
        if turn.prose.strip() and turn.codes:
            st.said.append(turn.prose.strip()[:4000])
            self.state.note(turn.prose.strip(), M.ROLE_PROSE)
            yield ModelReply(turn.prose.strip(), st.steps)
        if not turn.codes and self.protocol.flush_errors(self.history):
            st.steps += 1
            st.failures += 1
            if st.failures >= self.settings.max_consecutive_errors:
                result.status = "failed"
                result.answer = f"Gave up after {st.failures} malformed tool calls in a row."
            return
        st.sampling = {}
        if not turn.codes:
            async for event in settle_answer(
                self._task_levers, self.state, self.history, st, result, completion, turn, gen_s
            ):
                yield event
            return
        ran = len(st.cells)
        async for event in self._run_cells(st, result, turn, completion, gen_s):
            yield event
        if result.status == "error" and len(st.cells) > ran and st.cells[-1].ok:
            notice = compose_answer(self._task_levers, self.history, st, result)
            if notice is not None:
                yield notice

    async def _run_cells(
        self, st: TaskState, result: RunResult, turn: Turn, completion: Completion, gen_s: float
    ) -> AsyncIterator[Event]:
        """Approve, run and record each cell of a reply."""
        state = self.state
        assert state is not None
        for index, code in enumerate(turn.codes):
            st.steps += 1
            st.step += 1
            call_id = turn.call_id(index)
            code, st.rewritten_by, rewrite_note = first_rewrite(self._task_levers, st, code)
            decision, code = await self._approve(code, st.step)
            if decision == "quit":
                result.status = "stopped"
                result.answer = "Stopped by the user before running a cell."
                pending_ids: list[str | None] = [*turn.call_ids[index:]] or [None]
                for pending in pending_ids:
                    self.protocol.reply(self.history, pending, "The user stopped the run.")
                return
            if decision == "skip":
                state.skipped(code, **{M.STEP: st.step}, **self.provenance)
                self.protocol.reply(
                    self.history, call_id, "The user skipped this cell; it did not run."
                )
                yield CellSkipped(st.step, code)
                continue
            by, ask = first_decision(self._task_levers, st, code)
            if isinstance(ask, Stop):
                state.skipped(code, **{M.STEP: st.step, M.LEVER: by}, **self.provenance)
                self.protocol.reply(self.history, call_id, ask.answer)
                result.status, result.answer = ask.status, ask.answer
                if ask.notice:
                    yield Notice(ask.notice, "warning")
                return
            if ask is not None:
                st.failures += 1 if ask.failure else 0
                state.skipped(
                    code, **{M.STEP: st.step, M.LEVER: by, **ask.cell_meta}, **self.provenance
                )
                if ask.rewind:  # the attempt is forgotten, with the rest of this reply
                    start_afresh(self.history, st, ask)
                else:
                    st.sampling = dict(ask.sampling)
                    st.told.append(ask.message)
                    self.protocol.reject(self.history, call_id, ask.message)
                if ask.notice:
                    yield Notice(ask.notice)
                if ask.rewind:
                    return
                continue
            yield CellStarted(st.step, code)
            # the code is on disk before it runs: a run that ends mid-cell still shows it
            hint: list[str] = [rewrite_note] if rewrite_note else []
            record = None
            async for item in state.run(
                code,
                step=st.step,
                timeout=self.settings.cell_timeout,
                meta=self.provenance,
                expressions=probes(self._task_levers, st, code),
                annotate=functools.partial(
                    self._after_cell, st, first=index == 0, reply=completion, gen_s=gen_s, hint=hint
                ),
            ):
                if isinstance(item, CellRecord):
                    record = item
                else:
                    yield item
            assert record is not None
            st.told.extend(hint)  # the rewrite's note, the error hint, the levers' notes
            view = state.view(record, hint="\n".join(hint), vision=self.settings.vision)
            self.protocol.reply(self.history, call_id, view.text, view.images)

    def _after_cell(
        self,
        st: TaskState,
        cell: CellResult,
        summary: dict[str, VariableInfo] | None,
        *,
        first: bool,
        reply: Completion,
        gen_s: float,
        hint: list[str],
    ) -> dict[str, Any]:
        """A cell that ran, before its record is written: the levers see it (with the
        error hint); the hint and the levers' notes are appended to ``hint``, for the
        model's view; returns the agent's keys for the record."""
        assert self.state is not None
        self.cells.append(cell)
        st.cells.append(cell)
        namespace = summary if summary is not None else self.state.namespace
        before, st.namespace = st.namespace, dict(namespace)
        error = hints.error_hint(
            cell, namespace, st.libraries, self.settings.install, st.told,
            before=before, earlier=[c.code for c in self.cells[-40:-1]],
        )  # fmt: skip
        if not cell.ok and cell.error is not None and error:
            st.last_hint = error  # the last hint for a failing cell, for the levers' asks
        noted = [(lever.name, lever.after_cell(st, cell, error)) for lever in self._task_levers]
        st.doubts = [note for _, note in noted if note]
        hint.extend(note for note in (error, *st.doubts) if note)
        st.failures = st.failures + 1 if cell.status != "ok" else 0
        # every lever that acted on the cell (the eval's ablations rerun where one did)
        by = "+".join(n for n in (st.rewritten_by, *(name for name, note in noted if note)) if n)
        usage = reply.usage
        return {
            **({M.LEVER: by} if by else {}),
            "attempt": st.failures if cell.status != "ok" else 1,
            "model": self.endpoint.label if self.endpoint else "",
            M.TOKENS: {**usage.counts(), "source": usage.source} if first and usage else {},
            M.GEN_S: round(gen_s, 3) if first else 0.0,
            **self.host.cell_metadata(),
        }

    # ------------------------------------------------------------------ pieces
    async def _generate(
        self, sampling: dict[str, Any], step: int
    ) -> AsyncIterator[Event | Completion]:
        """Stream one reply (:func:`.reply.stream_reply`); an endpoint that rejects tool
        calls switches the run to fenced code blocks. ``step``: the next cell's number."""
        assert self._llm is not None
        while True:
            label = self.endpoint.label if self.endpoint else ""
            messages, tools = self.history.messages, self.protocol.tools()
            try:
                async for item in stream_reply(self._llm, messages, tools, sampling, step, label):
                    yield item
                return
            except Exception as exc:
                if self.protocol.name != "tools" or not should_fall_back_to_fenced(exc):
                    raise
                self.protocol = FencedProtocol(self._language())
                self.history.set_system(self._system_prompt())
                if self.state is not None:
                    self._run_meta(protocol="fenced")
                yield Notice("the endpoint rejected tool calls; switching to fenced code blocks")

    async def _ask_install(self, requirement: str) -> bool:
        """``--install ask``: the approval callback decides, as for a cell."""
        if self.approve is None:
            return False
        code = f"install_package({requirement!r})  # pip install into this session's site"
        decision = await call_in_consumer(self.approve, code, self._step)
        action = decision[0] if isinstance(decision, tuple) else decision
        return action == "run"

    def _language(self) -> str:
        info = self.executor.language_info if self.executor is not None else None
        return str((info or {}).get("name", "python"))

    async def _approve(self, code: str, step: int) -> tuple[str, str]:
        if self.approve is None:
            return "run", code
        decision = await call_in_consumer(self.approve, code, step)
        action, edited = decision if isinstance(decision, tuple) else (decision, None)
        if action not in ("run", "skip", "quit"):
            raise ConfigError(f"approval callback returned {action!r}; expected run, skip or quit")
        return action, edited if (action == "run" and edited) else code


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
