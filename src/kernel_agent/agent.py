"""The agent loop: the model writes a cell, the kernel runs it, the model reads the outputs.

:class:`AsyncAgent.run` is an async generator of typed events (see :mod:`events`);
nothing here prints. :class:`Agent` is its blocking face: the same loop on a
background event loop, with ``run()`` a plain iterator and ``run_to_end()``.
Every executed cell goes into the transcript as it finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .endpoint import Endpoint, open_endpoint
from .errors import ConfigError
from . import hints
from .events import (
    Answer,
    CellFinished,
    CellOutput,
    CellSkipped,
    CellStarted,
    Event,
    ModelDelta,
    ModelReply,
    ModelRetracted,
    Notice,
    RunFinished,
    RunResult,
    RunStarted,
    Usage,
)
from .executors.base import AsyncExecutor
from .llm_view import render_cell
from .messages import image_message, normalize_code, tool_history_message, usage_dict
from .namespace import NAMESPACE_EXPRESSION, VariableInfo, describe, parse_summary
from .prompts import prompt
from .rebuild import Rebuild, rebuild_state
from .results import CellResult
from .settings import Settings
from .syncify import BackgroundLoop, call_in_consumer
from .transcript import Transcript

__all__ = ["AsyncAgent", "Agent", "Approval", "default_notebook_path"]

#: ``approve(code, step)`` returns ("run", code) — possibly edited —, ("skip", None) or ("quit", None).
Approval = tuple[str, "str | None"]
ApproveFn = Callable[[str, int], Any]


def default_notebook_path(settings: Settings, task: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:40] or "run"
    return settings.notebook_dir / f"{stamp}-{slug}.ipynb"


class AsyncAgent:
    """An LLM working in one kernel. Reusable across tasks (interactive chat).

    ``executor`` defaults to a local (sandboxed) kernel built from ``settings``;
    ``approve`` is asked before each cell runs; ``namespace`` is a summary of the
    variables the executor's kernel already holds (see :mod:`namespace`).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        executor: AsyncExecutor | None = None,
        notebook: str | Path | None = None,
        approve: ApproveFn | None = None,
        namespace: dict[str, VariableInfo] | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self.executor = executor
        self._own_executor = executor is None
        self.notebook_path = Path(notebook) if notebook else None
        self.approve = approve
        self.transcript: Transcript | None = None
        self.messages: list[dict[str, Any]] = []
        self.cells: list[CellResult] = []
        self.usage = Usage()
        #: what isolates the kernel (notebook metadata); ``note`` is the short form
        self.sandbox: dict[str, Any] = {"mode": "unknown", "note": "executor supplied by the caller"}
        self._sandbox_warning: str | None = None
        #: what the kernel holds already (``namespace``: variables the user made before
        #: the run), so the note after the first cell lists only what the model changed
        self._namespace: dict[str, VariableInfo] = dict(namespace or {})
        self._endpoint_cm: Any = None
        self.endpoint: Endpoint | None = None
        self._llm: Any = None
        self.protocol = "fenced"
        self._step = 0
        self._pending_tool_errors: list[tuple[str, str]] = []
        self._seen_tool_call = False
        #: sampling overrides for the next reply (set after the model repeats a failing cell)
        self._resample: dict[str, Any] = {}
        self._task = ""
        #: (code, seconds) of the successful cells whose effects live in the kernel now
        self._state_cells: list[tuple[str, float]] = []

    # ---------------------------------------------------------------- lifecycle
    async def start(self, task: str = "") -> None:
        """Start the model endpoint, the kernel and the transcript (idempotent).

        The model server and the kernel start concurrently; if either fails, both stop.
        """
        if self.executor is None:
            from .executors.factory import make_executor

            self.executor, self.sandbox, self._sandbox_warning = make_executor(self.settings)
        starting = []
        if self.endpoint is None:
            starting.append(self._open_endpoint())
        if not getattr(self.executor, "language_info", None):
            starting.append(self.executor.start())
        failures = [r for r in await asyncio.gather(*starting, return_exceptions=True)
                    if isinstance(r, BaseException)]
        if failures:
            await self.close()
            raise failures[0]
        if self.transcript is None:
            path = self.notebook_path or default_notebook_path(self.settings, task)
            self.transcript = Transcript(
                path,
                kernelspec=self.executor.kernelspec,
                language_info=self.executor.language_info,
                metadata={
                    "model": self.endpoint.label,
                    "protocol": self.protocol,
                    "sandbox": self.sandbox,
                    "started": _now_iso(),
                },
            )
            self.messages = [{"role": "system", "content": self._system_prompt()}]

    async def _open_endpoint(self) -> None:
        from .llm import LLMClient, choose_protocol

        manager = open_endpoint(self.settings)
        self.endpoint = await manager.__aenter__()
        self._endpoint_cm = manager
        ep = self.endpoint
        llm_settings = self.settings.with_(base_url=ep.base_url, api_key=ep.api_key, model=ep.model)
        self._llm = LLMClient(llm_settings)
        self.protocol = choose_protocol(self.settings, ep.model if not ep.local else "local")

    async def close(self) -> None:
        """Stop the kernel (if this agent started it), the HTTP client and the local model server."""
        llm, self._llm = self._llm, None
        if llm is not None:
            with contextlib.suppress(Exception):
                await llm.aclose()
        executor, self.executor = self.executor, None
        if executor is not None and self._own_executor:
            with contextlib.suppress(Exception):
                await executor.shutdown()
        cm, self._endpoint_cm, self.endpoint = self._endpoint_cm, None, None
        if cm is not None:
            await cm.__aexit__(None, None, None)

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _system_prompt(self) -> str:
        assert self.executor is not None
        info = self.executor.language_info
        language = info.get("name", "python")
        how = prompt(f"run_{self.protocol}", language=language, fence_lang=language)
        vision = " and the image itself" if self.settings.vision else ""
        return prompt(
            "system",
            language=language,
            kernel_display=self.executor.kernelspec.get("display_name", language),
            cwd=str(getattr(self.executor, "cwd", "") or self.settings.cwd or Path.cwd()),
            how_to_run=how,
            vision_note=vision,
        )

    # --------------------------------------------------------------------- run
    async def run(self, task: str) -> AsyncIterator[Event]:
        """Work on ``task`` until the model answers; yields events as they happen."""
        task = task.strip()
        if not task:
            raise ConfigError("the task is empty")
        await self.start(task)
        assert self.transcript is not None and self.executor is not None
        started = time.monotonic()
        first_cell = len(self.cells)
        result = RunResult(answer="", status="error", notebook=self.transcript.path)
        self.transcript.add_markdown(f"**Task:** {task}", {"role": "task"})
        self.transcript.update_run_metadata(task=task)
        yield RunStarted(task, self.endpoint.label, self.protocol, self.transcript.path, self.sandbox.get("note", ""))
        if self._sandbox_warning:
            yield Notice(self._sandbox_warning, "warning")
            self._sandbox_warning = None  # once per agent, not per task
        self.messages.append({"role": "user", "content": task})
        self._task = task
        try:
            async for event in self._loop(result):
                yield event
        except (asyncio.CancelledError, KeyboardInterrupt):
            result.status, result.answer = "interrupted", result.answer or "(interrupted)"
            raise
        finally:
            result.cells = self.cells[first_cell:]
            result.usage = self.usage
            result.duration_s = time.monotonic() - started
            result.kernel_time_s = sum(c.duration for c in result.cells)
            self.transcript.update_run_metadata(
                status=result.status,
                usage=self.usage.as_dict(),
                ended=_now_iso(),
                duration_s=round(result.duration_s, 3),
                model_time_s=round(result.model_time_s, 3),
                kernel_time_s=round(result.kernel_time_s, 3),
            )
        if self.settings.clean_notebook:
            async for event in self._write_clean(result):
                yield event
        yield Answer(result.answer)
        yield RunFinished(result)

    async def _write_clean(self, result: RunResult) -> AsyncIterator[Event]:
        """Write the clean notebook beside the transcript; verify it if asked."""
        from .clean import clean_path_for, write_pair

        assert self.transcript is not None
        full, clean = write_pair(self.transcript, self.transcript.path, clean_path_for(self.transcript.path))
        result.clean_notebook = clean
        if not self.settings.verify:
            return
        from .verify import async_verify_notebook, record_verdict

        yield Notice(f"verifying {clean} in a fresh kernel")
        report = await async_verify_notebook(
            clean,
            timeout=self.settings.cell_timeout,
            cwd=getattr(self.executor, "cwd", None) or self.settings.cwd,
            env_passthrough=self.settings.env_passthrough,
            launcher=self._verify_launcher(),
        )
        record_verdict(clean, report)
        result.verify = report.to_metadata()
        self.transcript.update_run_metadata(verify=result.verify)
        level = "info" if report.reproduced else "warning"
        yield Notice(f"verify: {report.summary()}", level)

    def _verify_launcher(self) -> Any:
        """The sandbox launcher for verification, the same kind the agent's kernel used."""
        make = getattr(self.executor, "make_launcher", None)
        return make() if callable(make) else None

    async def _loop(self, result: RunResult) -> AsyncIterator[Event]:
        settings, transcript = self.settings, self.transcript
        assert transcript is not None
        failures = 0
        ran_code = nudged = checked = pushed = False
        steps = 0
        task_cells: list[CellResult] = []
        failed_codes: dict[str, str] = {}
        last_hint = ""
        while True:
            if steps >= settings.max_steps:
                result.status = "max_steps"
                result.answer = f"Stopped after {steps} steps without a final answer (--max-steps {settings.max_steps})."
                break
            gen_started = time.monotonic()
            completion = None
            async for event in self._generate():
                if isinstance(event, Event):
                    yield event
                else:
                    completion = event
            gen_s = time.monotonic() - gen_started
            result.model_time_s += gen_s
            assert completion is not None
            self.usage.add(completion.usage)
            codes, prose, call_ids = self._cells_from(completion)
            self.messages.append(self._history_message(completion, codes))
            if prose.strip() and codes:
                transcript.add_markdown(prose.strip(), {"role": "prose"})
                yield ModelReply(prose.strip(), steps)
            if not codes and self._pending_tool_errors:
                steps += 1
                failures += 1
                self._flush_tool_errors()
                if failures >= settings.max_consecutive_errors:
                    result.status = "failed"
                    result.answer = f"Gave up after {failures} malformed tool calls in a row."
                    break
                continue
            self._resample = {}
            if not codes and completion.truncated:
                steps += 1  # bounded by max_steps like a cell
                self.messages.append({"role": "user", "content": prompt("reply_truncated")})
                yield Notice("the model's reply was cut off at the token limit; asking for a shorter one")
                continue
            if not codes:
                if not ran_code and not nudged:
                    nudged = True
                    self.messages.append({"role": "user", "content": prompt("nudge_no_code")})
                    continue
                if task_cells and not task_cells[-1].ok and not pushed:
                    pushed = True
                    push = prompt("nudge_after_error")
                    if last_hint:
                        push += "\n" + last_hint
                    self.messages.append({"role": "user", "content": push})
                    continue
                answer = prose.strip() or completion.text.strip()
                check = None if checked else self._grounding_check(answer, task_cells)
                if check:
                    checked = True
                    self.messages.append({"role": "user", "content": check})
                    yield Notice("the answer states numbers no cell printed; asking the model to check")
                    continue
                result.answer = answer
                result.status = "ok" if ran_code else "no_code"
                break
            tokens = completion.usage
            for index, code in enumerate(codes):
                steps += 1
                self._step += 1
                call_id = call_ids[index] if call_ids else None
                decision, code = await self._approve(code)
                if decision == "quit":
                    result.status, result.answer = "stopped", "Stopped by the user before running a cell."
                    for pending in call_ids[index:] or [None]:
                        self._reply_to_call(pending, "The user stopped the run.")
                    break
                if decision == "skip":
                    transcript.add_code(code, None, {"status": "skipped", "step": self._step})
                    self._reply_to_call(call_id, "The user skipped this cell; it did not run.")
                    yield CellSkipped(self._step, code)
                    continue
                repeat = failed_codes.get(normalize_code(code))
                if repeat is not None:
                    failures += 1
                    transcript.add_code(code, None, {"status": "skipped", "step": self._step, "repeat": True})
                    if self.protocol == "fenced":
                        self.messages.pop()  # don't let the model anchor on its repeated code
                        self.messages.append({"role": "user", "content": prompt("repeated_failure", error=repeat)})
                    else:
                        self._reply_to_call(call_id, prompt("repeated_failure", error=repeat))
                    self._resample = {"temperature": max(settings.temperature or 0.0, 0.7), "seed": self._step}
                    yield Notice("the model repeated a failing cell; not run again, asked for a fix")
                    continue
                yield CellStarted(self._step, code)
                cell = None
                async for event in self._execute(code):
                    if isinstance(event, CellResult):
                        cell = event
                    else:
                        yield event
                assert cell is not None
                ran_code = True
                self.cells.append(cell)
                task_cells.append(cell)
                summary = parse_summary(cell.user_expressions.get("ns"))
                hint = hints.error_hint(cell, summary if summary is not None else self._namespace)
                if not cell.ok and cell.error is not None:
                    last_hint = hint or last_hint
                    failed_codes[normalize_code(code)] = f"{cell.error}\n{hint}".strip()
                failures = failures + 1 if cell.status != "ok" else 0
                meta = {
                    "status": cell.status,
                    "step": self._step,
                    "attempt": failures if cell.status != "ok" else 1,
                    "restarted": cell.restarted,
                    "model": self.endpoint.label if self.endpoint else "",
                    "tokens": usage_dict(tokens) if index == 0 else {},
                    "gen_s": round(gen_s, 3) if index == 0 else 0.0,
                    "exec_s": round(cell.duration, 3),
                }
                transcript.freeze(transcript.add_code(code, cell, meta))
                yield CellFinished(self._step, cell)
                before_restart = dict(self._namespace)
                view_text, images = self._view(cell, summary, hint)
                if cell.restarted:
                    rebuild = Rebuild()
                    async for event in rebuild_state(self._state_cells, self.executor, transcript,
                                                     settings, before_restart, rebuild):
                        yield event
                    self._namespace = rebuild.namespace
                    view_text += "\n" + rebuild.note
                elif cell.ok:
                    self._state_cells.append((code, cell.duration))
                self._reply_to_call(call_id, view_text, images)
                if cell.status != "ok" and self.protocol == "fenced":
                    break  # let the model fix it before running further blocks
            if result.status == "stopped":
                break
            if failures >= settings.max_consecutive_errors:
                result.status = "failed"
                result.answer = f"Gave up after {failures} failing cells in a row; the last error was: {self.cells[-1].error}"
                break
        transcript.add_markdown(result.answer, {"role": "answer"})

    # ------------------------------------------------------------------ pieces
    async def _generate(self) -> AsyncIterator[Any]:
        """Stream one reply: model events, then the Completion (falls back to fenced)."""
        from .llm import Completion, Retrying, TextDelta, should_fall_back_to_fenced

        while True:
            try:
                async for item in self._llm.stream_chat(self.messages, tools=self._tools(), **self._resample):
                    if isinstance(item, TextDelta):
                        yield ModelDelta(item.text)
                    elif isinstance(item, Retrying):
                        yield Notice(f"model endpoint: {item.reason}; retrying in {item.delay:.1f}s "
                                     f"({item.attempt}/{item.max_retries})", "warning")
                        if item.discard:
                            yield ModelRetracted()
                    elif isinstance(item, Completion):
                        yield item
                return
            except Exception as exc:
                if self.protocol != "tools" or not should_fall_back_to_fenced(exc):
                    raise
                self.protocol = "fenced"
                self.messages[0] = {"role": "system", "content": self._system_prompt()}
                if self.transcript is not None:
                    self.transcript.update_run_metadata(protocol="fenced")
                yield Notice("the endpoint rejected tool calls; switching to fenced code blocks")

    def _tools(self) -> list[dict[str, Any]] | None:
        if self.protocol != "tools":
            return None
        from .llm import RUN_CELL_TOOL

        return [RUN_CELL_TOOL]

    def _cells_from(self, completion: Any) -> tuple[list[str], str, list[str]]:
        """(codes to run, prose, tool-call ids) from one reply."""
        if self.protocol == "tools":
            codes, ids = [], []
            self._seen_tool_call = self._seen_tool_call or bool(completion.tool_calls)
            for call in completion.tool_calls:
                if call.name != "run_cell" or call.parse_error or call.code is None:
                    why = (f"there is no tool named {call.name!r}" if call.name != "run_cell"
                           else call.parse_error or "missing the 'code' argument")
                    self._pending_tool_errors.append((call.id, f"Invalid run_cell call: {why}. Call run_cell with a JSON object {{\"code\": \"...\"}}."))
                    continue
                codes.append(call.code)
                ids.append(call.id)
            if completion.tool_calls or self._pending_tool_errors or self._seen_tool_call:
                return codes, completion.text or "", ids
            # a server that ignores `tools` answers with fenced blocks: run them all the same
        from .llm_protocol import split_code

        text = completion.text or ""
        language = self.executor.language_info.get("name", "python")
        # a reply cut at the token limit may end inside a block: that code is not whole
        codes, prose = split_code(text, language, include_unclosed=not completion.truncated)
        return codes[:1], prose if codes else text, []

    def _reply_to_call(self, call_id: str | None, text: str, images: list[str] | None = None) -> None:
        if self.protocol == "tools" and call_id is not None:
            self._flush_tool_errors()
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
            if images:
                self.messages.append(image_message("Images from the cell above:", images))
        elif images:
            self.messages.append(image_message(text, images))
        else:
            self.messages.append({"role": "user", "content": text})

    def _grounding_check(self, answer: str, cells: list[CellResult]) -> str | None:
        """A request to re-check, when the answer states numbers that no output shows."""
        from .grounding import ungrounded_numbers

        outputs = [render_cell(c, budget=self.settings.llm_output_chars).text for c in cells if c.ok]
        if not outputs:
            return None
        given = "\n".join([self._task, *(c.code for c in cells)])
        missing = ungrounded_numbers(answer, outputs, given=given)
        if not missing:
            return None
        printed = "\n".join(outputs[-3:])[-1500:]
        return prompt("answer_check", numbers=", ".join(missing), printed=printed)

    def _history_message(self, completion: Any, codes: list[str]) -> dict[str, Any]:
        """What the model remembers of its own reply.

        With fenced code, a reply that runs code is remembered as that code only: prose
        written before seeing any output (often a guess) is kept in the notebook but not
        fed back, so the model does not anchor its final answer on it.
        """
        if self.protocol == "tools" and completion.tool_calls:
            return tool_history_message(completion)
        if codes:
            lang = self.executor.language_info.get("name", "python") if self.executor else "python"
            return {"role": "assistant", "content": "\n\n".join(f"```{lang}\n{c}\n```" for c in codes)}
        return completion.assistant_message()

    def _flush_tool_errors(self) -> None:
        for bad_id, why in self._pending_tool_errors:
            self.messages.append({"role": "tool", "tool_call_id": bad_id, "content": why})
        self._pending_tool_errors = []

    async def _approve(self, code: str) -> tuple[str, str]:
        if self.approve is None:
            return "run", code
        decision = await call_in_consumer(self.approve, code, self._step)
        action, edited = decision if isinstance(decision, tuple) else (decision, None)
        if action not in ("run", "skip", "quit"):
            raise ConfigError(f"approval callback returned {action!r}; expected run, skip or quit")
        return action, edited if (action == "run" and edited) else code

    async def _execute(self, code: str) -> AsyncIterator[Any]:
        """Run one cell, yielding CellOutput events while it runs, then the CellResult."""
        assert self.executor is not None
        queue: asyncio.Queue[Any] = asyncio.Queue()
        step = self._step
        python = self.executor.language_info.get("name") == "python"
        task = asyncio.ensure_future(
            self.executor.execute(
                code,
                timeout=self.settings.cell_timeout,
                on_output=lambda out: queue.put_nowait(CellOutput(step, out)),
                user_expressions={"ns": NAMESPACE_EXPRESSION} if python else None,
            )
        )
        try:
            while not task.done() or not queue.empty():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
        finally:
            if not task.done():  # cancelled mid-cell (Ctrl-C): stop the code in the kernel too
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self.executor.interrupt())
                with contextlib.suppress(BaseException):
                    await task
        result = task.result()
        if python and result.status == "error" and not result.user_expressions:
            # the kernel skips user_expressions after an error: ask again with an empty cell
            # (no execution count is used), so the model still learns what the cell defined
            probe = await self.executor.execute("", timeout=30, user_expressions={"ns": NAMESPACE_EXPRESSION})
            result.user_expressions = probe.user_expressions
        yield result

    def _view(
        self, cell: CellResult, summary: dict[str, VariableInfo] | None, hint: str
    ) -> tuple[str, list[str]]:
        view = render_cell(cell, budget=self.settings.llm_output_chars, vision=self.settings.vision)
        notes = f"\n{hint}" if hint else ""
        if summary is not None:
            if cell.restarted:
                self._namespace = {}
            change = describe(self._namespace, summary)
            self._namespace = summary
            if change:
                notes += f"\nVariables {change}"
        text = prompt(
            "cell_output",
            count=cell.execution_count if cell.execution_count is not None else "?",
            status=cell.status,
            body=view.text + notes,
        )
        return text, view.images


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Agent:
    """The blocking face of :class:`AsyncAgent`: ``run()`` iterates events, ``run_to_end()`` returns.

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
