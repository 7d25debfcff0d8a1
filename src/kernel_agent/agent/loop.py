"""The agent loop: the model writes a cell, the kernel runs it, the model reads the outputs.

:class:`AsyncAgent.run` is an async generator of typed events (see :mod:`kernel_agent.events`);
nothing here prints. :class:`Agent` is its blocking face: the same loop on a
background event loop, with ``run()`` a plain iterator and ``run_to_end()``.
Every executed cell goes into the transcript as it finishes.

The loop is mechanism only: generate, parse (the :mod:`.protocols`), approve,
execute, record. The small-model policies are :mod:`.levers` it consults at named
points; their memory is the run's :class:`~.state.TaskState`; the messages live in
one :class:`~.history.History`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import hints
from ..errors import ConfigError, KernelAgentError, one_line
from ..events import (
    Answer,
    CellSkipped,
    CellStarted,
    Event,
    ModelCalled,
    ModelDelta,
    ModelReply,
    ModelRetracted,
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
from ..llm.stream import Completion, TextDelta, ToolCallDelta
from ..notebook import cellmeta as M
from ..notebook.transcript import Transcript
from ..prompts import prompt
from ..results import CellResult
from ..settings import Settings
from ..syncify import BackgroundLoop, call_in_consumer
from ..tools.host import HostSide
from ..tracing import make_tracer
from .briefing import probe_libraries
from .budget import Budget, BudgetStop, stopped_answer
from .history import History
from .levers import Lever, ResultCheck, levers_for
from .protocols import FencedProtocol, Protocol, make_protocol
from .state import Ask, Stop, TaskState, Turn

if TYPE_CHECKING:
    from ..remote.work import RemoteWork

__all__ = ["AsyncAgent", "Agent", "default_notebook_path"]

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
    given (see :mod:`kernel_agent.tracing`).
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
        self.levers: list[Lever] = levers_for(self.settings)
        if self.settings.ask_result:
            self.levers.append(ResultCheck(self.host.result_missing))
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
        if not self._attached:
            await self.host.attach(self.executor, self._language())
        self.protocol.language = self._language()
        assert self.endpoint is not None
        if not self._attached:
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
        info = self.executor.language_info
        language = info.get("name", "python")
        how = prompt(f"run_{self.protocol.name}", language=language, fence_lang=language)
        vision = " and the image itself" if self.settings.vision else ""
        system = prompt(
            "system",
            language=language,
            kernel_display=self.executor.kernelspec.get("display_name", language),
            how_to_run=how,
            vision_note=vision,
            data_note=(
                prompt("data_note_python")
                if language == "python"
                else prompt("code_note_other", language=language)
            )
            + "\n",
        )
        if self._libraries_note:
            system += f"\n{self._libraries_note}"
        section = self.host.prompt_section()
        if section:
            system += f"\n\n{section}"
        # last: a sandboxed kernel's work dir is new each run, and everything before it is a
        # prefix a warm local model has already evaluated
        return f"{system}\n\n{prompt('workdir', cwd=self._prompt_cwd()).strip()}"

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
        notes = [
            n for n in [await lever.task_note(state, self.executor) for lever in self.levers] if n
        ]
        if notes:
            self.state.note("\n\n".join(_fenced(n) for n in notes), M.ROLE_BRIEFING)
        self.history.user("\n\n".join([task, *notes]))
        try:
            async for event in self._loop(state, result):
                yield event
        except (asyncio.CancelledError, KeyboardInterrupt):
            result.status, result.answer = "interrupted", result.answer or "(interrupted)"
            raise
        finally:
            result.cells = self.cells[first_cell:]
            result.usage = self.usage
            result.duration_s = time.monotonic() - started
            result.kernel_time_s = sum(c.duration for c in result.cells)
            result.cost = budget.cost if budget.price is not None else None
            result.budget = budget.as_metadata() if budget.limits else None
            spent: dict[str, Any] = {"budget": result.budget} if result.budget else {}
            if result.cost is not None:
                spent["cost"] = round(result.cost, 6)
            self._run_meta(
                **spent,
                status=result.status,
                usage=self.usage.as_dict(),
                ended=_now_iso(),
                duration_s=round(result.duration_s, 3),
                model_time_s=round(result.model_time_s, 3),
                kernel_time_s=round(result.kernel_time_s, 3),
                **self.host.run_metadata(),
            )
        remote = self._remote_files()
        notice = await self._deliver_remote(result, remote) if remote else self._deliver(result)
        if notice is not None:
            yield notice
        if self.host.result.declared:  # set_result's data, and its files beside the notebook
            result.result = self.host.result.data
            if remote is not None:
                result.files, left_out = await self._deliver_result_remote(remote)
            else:
                result.files, left_out = self.host.deliver(self.transcript.path)
            if left_out:
                yield Notice(f"result files left out: {'; '.join(left_out[:3])}", "warning")
        if self.settings.clean_notebook:
            try:
                async for event in self._write_clean(result):
                    yield event
            except Exception as exc:  # hostile outputs or a full disk: the answer is not lost
                yield Notice(f"no clean notebook: {one_line(exc)}", "warning")
        yield Answer(result.answer)
        yield RunFinished(result)

    def _deliver(self, result: RunResult) -> Notice | None:
        """Copy the files the kernel wrote in its private work dir beside the notebook."""
        from ..delivery import deliver_work_files

        transcript = self.transcript
        work = self.executor.kernel_cwd if self.executor is not None else None
        if work is None or transcript is None or self.executor is None or work == self.executor.cwd:
            return None  # no private work dir: the kernel wrote in the user's own
        return self._delivery_notice(result, *deliver_work_files(work, transcript.path))

    def _remote_files(self) -> RemoteWork | None:
        """A remote kernel's work dir (its files come over the kernel's channels)."""
        from ..executors.gateway import AsyncGatewaySession

        executor = self.executor
        return executor.files if isinstance(executor, AsyncGatewaySession) else None

    async def _deliver_remote(self, result: RunResult, remote: RemoteWork) -> Notice | None:
        """Pull the files a remote kernel wrote in its work dir beside the notebook."""
        assert self.transcript is not None
        try:
            found = await remote.deliver(self.transcript.path)
        except KernelAgentError as exc:  # the answer is not lost for want of the files
            return Notice(f"no files from the remote kernel: {exc}", "warning")
        return self._delivery_notice(result, *found)

    async def _deliver_result_remote(self, remote: RemoteWork) -> tuple[list[Path], list[str]]:
        assert self.transcript is not None
        declared = self.host.result
        try:
            return await remote.deliver_result(
                declared.files, self.transcript.path, declared.limits.max_file_bytes
            )
        except KernelAgentError as exc:
            return [], [str(exc)]

    def _delivery_notice(
        self, result: RunResult, delivered: list[Path], skipped: list[str]
    ) -> Notice | None:
        transcript = self.transcript
        assert transcript is not None
        result.files = delivered
        if delivered:
            self._run_meta(files=[p.name for p in delivered])
        if not delivered and not skipped:
            return None
        where = transcript.path.with_name(f"{transcript.path.stem}_files") / "work"
        text = f"{len(delivered)} file(s) the kernel wrote are in {where}"
        if skipped:
            text += f"; left out: {'; '.join(skipped[:3])}"
        return Notice(text, "warning" if skipped else "info")

    async def _write_clean(self, result: RunResult) -> AsyncIterator[Event]:
        """Write the clean notebook beside the transcript; verify it if asked."""
        assert self.state is not None
        result.clean_notebook = clean = self.state.write_clean()
        if not self.settings.verify:
            return
        yield Notice(f"verifying {clean} in a fresh kernel")
        # in the kernel's own work dir (the verifying kernel sees what it saw), with what
        # this run installed and nothing the notebook could add
        report = await self.state.verify(cwd=self._work_dir(), install=self.host.rerun_policy())
        result.verify = report.to_metadata()
        level = "info" if report.reproduced else "warning"
        yield Notice(f"verify: {report.summary()}", level)

    def _prompt_cwd(self) -> str:
        """Where the model is told its code runs (a remote kernel's own work dir, if known)."""
        remote = self._remote_files()
        return remote.work if remote is not None and remote.work else str(self._work_dir())

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
                result.answer = (
                    f"Stopped after {st.steps} steps without a final answer "
                    f"(--max-steps {settings.max_steps})."
                )
                break
            stop = await self._budget_stop(st)
            if stop is not None:
                result.status, result.answer = "budget", stopped_answer(stop, st.cells)
                break
            async for event in self._turn(st, result):
                yield event
            if result.status == "error" and st.failures >= settings.max_consecutive_errors:
                result.status = "failed"
                result.answer = (
                    f"Gave up after {st.failures} failing cells in a row; "
                    f"the last error was: {self.cells[-1].error}"
                )
        self._step = st.step
        state.note(
            result.answer,
            M.ROLE_ANSWER,
            **({"composed_by": st.composed_by} if st.composed_by else {}),
        )

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
        for lever in self.levers:
            lever.after_reply(st, turn)
        self.protocol.remember(self.history, completion, turn)
        if turn.prose.strip() and turn.codes:
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
            async for event in self._answer(st, result, completion, turn, gen_s):
                yield event
            return
        ran = len(st.cells)
        async for event in self._run_cells(st, result, turn, completion, gen_s):
            yield event
        if result.status == "error" and len(st.cells) > ran and st.cells[-1].ok:
            notice = self._compose(st, result)
            if notice is not None:
                yield notice

    def _compose(self, st: TaskState, result: RunResult) -> Notice | None:
        """The final answer made from the last cell's output by a lever, with no model turn."""
        for lever in self.levers:
            answer = lever.compose(st)
            if answer:
                result.answer, result.status = answer, "ok"
                st.composed_by = lever.name
                self.history.assistant({"role": "assistant", "content": answer})
                return Notice("the last cell printed every asked value; answered from them")
        return None

    async def _answer(
        self, st: TaskState, result: RunResult, completion: Completion, turn: Turn, gen_s: float
    ) -> AsyncIterator[Event]:
        """A reply without code: the answer, unless it was cut off or a lever asks again.

        A reply sent back is kept in the transcript as a note (why, and the model's time).
        """
        answer = turn.prose.strip() or completion.text.strip()
        if completion.truncated:
            st.steps += 1  # bounded by max_steps, like a cell
            by = "reply_truncated"
            ask: Ask | None = Ask(
                prompt("reply_truncated"),
                notice="the model's reply was cut off at the token limit; asking for a shorter one",
            )
        else:
            by, ask = _first((lever.name, lever.on_answer(st, answer)) for lever in self.levers)
            if ask is None:
                result.answer = answer
                result.status = "ok" if st.ran_code else "no_code"
                return
        assert ask is not None and self.state is not None
        why = ask.notice or "asked the model again"
        quoted = "\n".join(f"> {line}" for line in answer[:1500].splitlines()) or "> (empty)"
        # the lever and the reply it refused: the eval scores that reply (a lever's precision)
        self.state.note(
            f"*kernel-agent: {why}.* The reply was:\n\n{quoted}",
            M.ROLE_NOTE,
            **{M.GEN_S: round(gen_s, 3), M.LEVER: by, "reply": answer[:4000]},
        )
        self.history.user(ask.message)
        if ask.notice:
            yield Notice(ask.notice)

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
            decision, code = await self._approve(code, st.step)
            if decision == "quit":
                result.status, result.answer = (
                    "stopped",
                    "Stopped by the user before running a cell.",
                )
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
            by, ask = self._before_cell(st, code)
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
                self.protocol.reject(self.history, call_id, ask.message)
                st.sampling = dict(ask.sampling)
                if ask.notice:
                    yield Notice(ask.notice)
                continue
            yield CellStarted(st.step, code)
            # the code is on disk before it runs: a run that ends mid-cell still shows it
            hint: list[str] = []
            record = None
            async for item in state.run(
                code,
                step=st.step,
                timeout=self.settings.cell_timeout,
                meta={M.STEP: st.step, **self.provenance},
                annotate=functools.partial(
                    self._after_cell, st, first=index == 0, reply=completion, gen_s=gen_s, hint=hint
                ),
            ):
                if isinstance(item, CellRecord):
                    record = item
                else:
                    yield item
            assert record is not None
            view = state.view(record, hint=hint[0], vision=self.settings.vision)
            self.protocol.reply(self.history, call_id, view.text, view.images)

    def _before_cell(self, st: TaskState, code: str) -> tuple[str, Ask | Stop | None]:
        """The first lever that skips the cell (or stops the run) before it runs, by name."""
        for lever in self.levers:
            decision = lever.before_cell(st, code)
            if decision is not None:
                return lever.name, decision
        return "", None

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
        error hint, appended to ``hint``); returns the agent's keys for the record."""
        assert self.state is not None
        self.cells.append(cell)
        st.cells.append(cell)
        namespace = summary if summary is not None else self.state.namespace
        hint.append(hints.error_hint(cell, namespace, st.libraries, self.settings.install))
        for lever in self.levers:
            lever.after_cell(st, cell, hint[0])
        st.failures = st.failures + 1 if cell.status != "ok" else 0
        usage = reply.usage
        return {
            "attempt": st.failures if cell.status != "ok" else 1,
            "model": self.endpoint.label if self.endpoint else "",
            M.TOKENS: {**usage.counts(), "source": usage.source} if first and usage else {},
            M.GEN_S: round(gen_s, 3) if first else 0.0,
            **self.host.cell_metadata(),
        }

    # ------------------------------------------------------------------ pieces
    async def _budget_stop(self, st: TaskState) -> BudgetStop | None:
        """The budget that stops the run before the next model call (unless extended)."""
        budget = st.budget
        while budget is not None and (stop := budget.check()) is not None:
            if self.extend is None or not await call_in_consumer(self.extend, stop):
                budget.stopped_by = stop.name
                return stop
            budget.extend(stop)
        return None

    async def _generate(
        self, sampling: dict[str, Any], step: int
    ) -> AsyncIterator[Event | Completion]:
        """Stream one reply: its events, ModelCalled, then the Completion (may fall back to fenced).

        ``step`` is the number the next cell will have.
        """
        from ..llm.client import Retrying

        assert self._llm is not None
        while True:
            started, first = time.monotonic(), None
            try:
                stream = self._llm.stream_chat(
                    self.history.messages, tools=self.protocol.tools(), **sampling
                )
                async for item in stream:
                    if first is None and isinstance(item, (TextDelta, ToolCallDelta)):
                        first = time.monotonic() - started
                    if isinstance(item, TextDelta):
                        yield ModelDelta(item.text)
                    elif isinstance(item, Retrying):
                        yield Notice(
                            f"model endpoint: {item.reason}; retrying in {item.delay:.1f}s "
                            f"({item.attempt}/{item.max_retries})",
                            "warning",
                        )
                        if item.discard:
                            yield ModelRetracted()
                        started, first = time.monotonic() + item.delay, None
                    elif isinstance(item, Completion):
                        yield ModelCalled(
                            step,
                            self.endpoint.label if self.endpoint else "",
                            item,
                            time.monotonic() - started,
                            first,
                            {**self._llm.sampling, **sampling},
                        )
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


def _first(asks: Iterator[tuple[str, Ask | None]]) -> tuple[str, Ask | None]:
    """The first lever's ask and its name (later levers are not consulted once one asks)."""
    return next(((name, ask) for name, ask in asks if ask is not None), ("", None))


def _fenced(note: str) -> str:
    """A briefing note for the notebook: its first line as text, the rest verbatim."""
    head, _, body = note.partition("\n")
    return f"{head}\n\n```text\n{body}\n```" if body else head


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Agent:
    """The blocking face of :class:`AsyncAgent`: ``run()`` iterates events; ``run_to_end()``.

    ``with Agent(settings) as agent: result = agent.run_to_end("...")``.
    """

    def __init__(self, settings: Settings | None = None, **kwargs: Any) -> None:
        self._bg = BackgroundLoop()
        self.aio = AsyncAgent(settings, **kwargs)

    def run(self, task: str) -> Iterator[Event]:
        return self._bg.iterate(self.aio.run(task))

    def run_to_end(self, task: str) -> RunResult:
        finished = None
        for event in self.run(task):
            if isinstance(event, RunFinished):
                finished = event.result
        assert finished is not None
        return finished

    @property
    def transcript(self) -> Transcript | None:
        return self.aio.transcript

    def close(self) -> None:
        try:
            self._bg.run(self.aio.close())
        finally:
            self._bg.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
