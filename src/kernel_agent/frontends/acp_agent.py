"""The Agent Client Protocol front end: kernel-agent as an ACP agent over stdio.

Editors (Zed) and Jupyter AI v3 (through ``jupyter-ai-acp-client``) drive it. One ACP
session is one :class:`~kernel_agent.agent.AsyncAgent`: one kernel, started at the
first prompt, whose view of the user's files is the session's ``cwd``, and one notebook
(``<cwd>/notebooks/<time>-acp-<id>.ipynb``); prompts in a row share them and the
conversation (a follow-up sees the earlier variables and questions). A prompt runs the
agent and its typed events become session updates (:class:`AcpUpdates`):

- the model's streamed text -> agent thought chunks; its prose between cells and the
  final answer -> agent message chunks; notices -> thoughts (warnings -> messages);
- each cell -> one tool call, ``pending`` -> ``in_progress`` -> ``completed`` or
  ``failed``, with its code and a bounded, escaped text of its output (a skipped cell
  is ``failed`` and says so).

With ``approve``, each cell is first a permission request (allow once, allow always,
reject); a reject skips the cell, as ``run --approve`` does. ``session/cancel``
interrupts the run (a running cell gets a kernel interrupt; the kernel keeps its state)
and the prompt ends with ``cancelled``. A run that cannot start or reach its model
ends in a JSON-RPC error whose message is one sentence.

Everything sent to the client that a kernel or a model produced is escaped
(:func:`~kernel_agent.edges.escapes.visible`), fenced so it cannot turn into markup
(:func:`fenced`) and bounded (:data:`OUTPUT_CHARS`, :data:`MESSAGE_CHARS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
from acp import schema as S

from ..edges.escapes import visible
from ..errors import ConfigError, KernelAgentError
from ..events import (
    Answer,
    CellFinished,
    CellOutput,
    CellSkipped,
    CellStarted,
    EventHandlers,
    ModelDelta,
    ModelReply,
    ModelRetracted,
    Notice,
    RunFinished,
    RunResult,
)
from ..llm.view import budget_text, render_cell
from ..results import strip_ansi
from ..settings import Settings
from ..version import __version__
from .acp_text import fenced, fenced_inline, notebook_named, prompt_text

if TYPE_CHECKING:
    from ..agent import AsyncAgent
    from ..jupyter.attach import JupyterTarget

__all__ = [
    "KernelAgentAcp",
    "AcpUpdates",
    "serve_stdio",
    "OUTPUT_CHARS",
    "MESSAGE_CHARS",
    "PERMISSION_OPTIONS",
]

#: the pause between a turn's last update and its end (see ``_run``)
_SETTLE_S = 0.2

#: Most characters of a cell's output one tool-call update carries.
OUTPUT_CHARS = 4000
#: Most characters of one message (a reply's prose, the answer, a notice).
MESSAGE_CHARS = 20_000
#: Seconds between two live updates of a running cell's output.
LIVE_EVERY_S = 0.5

PERMISSION_OPTIONS = [
    S.PermissionOption(option_id="allow_once", name="Run this cell", kind="allow_once"),
    S.PermissionOption(
        option_id="allow_always", name="Run every cell of this session", kind="allow_always"
    ),
    S.PermissionOption(option_id="reject_once", name="Skip this cell", kind="reject_once"),
    S.PermissionOption(option_id="stop", name="Stop the run", kind="reject_always"),
]

#: how a run's status ends an ACP prompt turn
_STOP_REASONS: dict[str, Any] = {"max_steps": "max_turn_requests", "interrupted": "cancelled"}


def _shown(text: str, budget: int) -> str:
    """Kernel or model text as the client may show it: bounded, then escaped."""
    return visible(budget_text(text, budget))


def _one_sentence(exc: BaseException) -> str:
    text = visible(" ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _content(text: str) -> S.ContentToolCallContent:
    return acp.tool_content(acp.text_block(text))


@dataclass
class _Cell:
    """One cell's tool call: its id, code and the live tail of its output."""

    tool_id: str
    code: str
    tail: str = ""
    seen: int = 0
    sent_at: float = 0.0
    started: bool = False

    def add(self, text: str) -> None:
        """Keep the last :data:`OUTPUT_CHARS` characters (a huge print costs no more)."""
        self.seen += len(text)
        self.tail = (self.tail + text[-OUTPUT_CHARS:])[-OUTPUT_CHARS:]

    def live_text(self) -> str:
        cut = self.seen - len(self.tail)
        head = f"[... {cut:,} characters before ...]\n" if cut > 0 else ""
        return head + self.tail


def _output_text(out: Any) -> str:
    """The text of one live output message (streams, errors, plain displays)."""
    if not isinstance(out, dict):
        return ""
    kind = out.get("output_type")
    if kind == "stream":
        return str(out.get("text", ""))
    if kind == "error":
        return strip_ansi("\n".join(str(line) for line in out.get("traceback", []) or []))
    data = out.get("data")
    if isinstance(data, dict):
        if "text/plain" in data:
            return str(data["text/plain"]) + "\n"
        mimes = [m for m in data if isinstance(m, str)][:3]
        return f"[{', '.join(mimes)} output]\n" if mimes else ""
    return ""


class AcpUpdates(EventHandlers):
    """Turns one prompt's typed events into ACP session updates, in order.

    Handlers only collect updates (:meth:`take` hands them over to be sent). A cell's
    tool-call id is ``cell-<turn>-<step>``: ``turn`` numbers the prompt in its session,
    so ids stay unique across prompts (a cancelled run's steps may be counted again).
    """

    def __init__(self, turn: int, where: str = "", clock: Any = time.monotonic) -> None:
        self.turn = turn
        self.where = where
        self.clock = clock
        self.cells: dict[int, _Cell] = {}
        self.result: RunResult | None = None
        self._pending: list[Any] = []

    def take(self) -> list[Any]:
        out, self._pending = self._pending, []
        return out

    def _say(self, text: str) -> None:
        self._pending.append(acp.update_agent_message_text(text))

    def _think(self, text: str) -> None:
        self._pending.append(acp.update_agent_thought_text(text))

    def announce(self, step: int, code: str) -> _Cell:
        """The cell's tool call, ``pending`` (once per step)."""
        cell = self.cells.get(step)
        if cell is None:
            cell = self.cells[step] = _Cell(f"cell-{self.turn}-{step}", code)
            self._pending.append(
                acp.start_tool_call(
                    cell.tool_id,
                    self.title(step),
                    kind="execute",
                    status="pending",
                    content=[_content(fenced(_shown(code, MESSAGE_CHARS), "python"))],
                    raw_input={"code": budget_text(code, MESSAGE_CHARS)},
                )
            )
        return cell

    def title(self, step: int) -> str:
        return f"Run cell {step}" + (f" in {visible(self.where)}" if self.where else "")

    def permission_call(self, cell: _Cell, step: int) -> S.ToolCallUpdate:
        """What a permission request shows: the pending cell and its code."""
        return S.ToolCallUpdate(
            tool_call_id=cell.tool_id,
            title=self.title(step),
            kind="execute",
            status="pending",
            content=[_content(fenced(_shown(cell.code, MESSAGE_CHARS), "python"))],
            raw_input={"code": budget_text(cell.code, MESSAGE_CHARS)},
        )

    def _update(
        self, cell: _Cell, status: Any, output: str | None, raw: dict[str, Any] | None = None
    ) -> None:
        """A tool-call update; the output goes in ``content`` (fenced, for clients that
        render Markdown) and in ``raw_output`` (what Jupyter AI shows), escaped."""
        content = [_content(fenced(_shown(cell.code, MESSAGE_CHARS), "python"))]
        raw = dict(raw or {})
        if output is not None:
            shown = _shown(output, OUTPUT_CHARS + 400)  # + a status line
            content.append(_content(fenced(shown)))
            raw["output"] = shown
        self._pending.append(
            acp.update_tool_call(
                cell.tool_id, status=status, content=content, raw_output=raw or None
            )
        )

    def interrupted(self) -> None:
        """The run was cancelled: close every open tool call as failed."""
        for cell in self.cells.values():
            if cell.started:
                self._update(cell, "failed", cell.live_text() + "\n[interrupted]")
                cell.started = False

    # ------------------------------------------------------------------ events
    def _on_ModelDelta(self, event: ModelDelta) -> None:
        self._think(visible(event.text[:MESSAGE_CHARS]))

    def _on_ModelRetracted(self, event: ModelRetracted) -> None:
        self._think("\n[the model is asked again]\n")

    def _on_ModelReply(self, event: ModelReply) -> None:
        self._say(_shown(event.text, MESSAGE_CHARS) + "\n\n")

    def _on_Notice(self, event: Notice) -> None:
        text = f"kernel-agent: {_shown(event.text, MESSAGE_CHARS)}"
        if event.level == "warning":
            self._say(f"\n\n> {text}\n\n")
        else:
            self._think(f"\n{text}\n")

    def _on_CellStarted(self, event: CellStarted) -> None:
        cell = self.announce(event.step, event.code)
        cell.code, cell.started, cell.sent_at = event.code, True, self.clock()
        self._update(cell, "in_progress", None)

    def _on_CellOutput(self, event: CellOutput) -> None:
        cell = self.cells.get(event.step)
        if cell is None:
            return
        cell.add(_output_text(event.output))
        now = self.clock()
        if now - cell.sent_at >= LIVE_EVERY_S:
            cell.sent_at = now
            self._update(cell, "in_progress", cell.live_text())

    def _on_CellFinished(self, event: CellFinished) -> None:
        cell = self.announce(event.step, event.result.code)
        result = event.result
        text = render_cell(result, budget=OUTPUT_CHARS).text
        if result.status not in ("ok", "error") and result.error:
            text = f"{text}\n[{result.status}: {result.error}]".strip()
        raw = {
            "status": result.status,
            "execution_count": result.execution_count,
            "seconds": round(result.duration, 3),
        }
        cell.started = False
        self._update(cell, "completed" if result.ok else "failed", text or "(no output)", raw)

    def _on_CellSkipped(self, event: CellSkipped) -> None:
        cell = self.announce(event.step, event.code)
        self._update(
            cell, "failed", "skipped by the user: the cell did not run", {"status": "skipped"}
        )

    def _on_Answer(self, event: Answer) -> None:
        self._say(_shown(event.text, MESSAGE_CHARS) or "(no answer)")

    def _on_RunFinished(self, event: RunFinished) -> None:
        self.result = result = event.result
        self._say("\n\n" + _footer(result))


def _footer(result: RunResult) -> str:
    """Where the notebooks are, and how the run ended (paths escaped, in code spans)."""
    parts = [f"status: {result.status}"]
    if result.notebook is not None:
        parts.append(f"notebook: {fenced_inline(str(result.notebook))}")
    if result.clean_notebook is not None:
        parts.append(f"clean notebook: {fenced_inline(str(result.clean_notebook))}")
    return "— " + " · ".join(parts)


@dataclass
class _Entry:
    """One ACP session: its agent (one kernel, one notebook, the conversation so far),
    the prompt running now and the updates of that prompt."""

    agent: AsyncAgent | None  # None until the first prompt names the notebook
    notebook: Path
    settings: Settings
    #: with ``--jupyter-url``: the notebook this session works in
    target: JupyterTarget | None = None
    seeded: bool = False
    turns: int = 0
    work: asyncio.Task[Any] | None = None
    updates: AcpUpdates | None = None
    cancelled: bool = False
    always: bool = False


class KernelAgentAcp:
    """The ACP agent (``acp.Agent``): sessions, prompts, cancel, permission requests."""

    def __init__(
        self, settings: Settings, *, approve: bool = False, target: JupyterTarget | None = None
    ) -> None:
        self.settings = settings
        self.approve = approve
        #: with ``--jupyter-url``: the notebook open on a Jupyter server, worked in
        self.target = target
        self.sessions: dict[str, _Entry] = {}
        self.client: dict[str, Any] = {"name": "unknown"}
        self._conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> S.InitializeResponse:
        if client_info is not None:
            self.client = {"name": client_info.name, "version": client_info.version}
        return S.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=S.AgentCapabilities(
                load_session=False,
                prompt_capabilities=S.PromptCapabilities(embedded_context=True),
            ),
            agent_info=S.Implementation(
                name="kernel-agent", title="kernel-agent", version=__version__
            ),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> S.NewSessionResponse:
        view = Path(cwd)
        if not view.is_absolute() or not view.is_dir():
            raise acp.RequestError.invalid_params(
                {"details": f"cwd must be an existing absolute directory: {visible(cwd)[:300]}"}
            )
        notebooks = self.settings.notebook_dir
        settings = self.settings.with_(
            # an attached notebook's kernel sees the server's files, not this directory
            cwd=view if self.target is None else None,
            notebook_dir=notebooks if notebooks.is_absolute() else view / notebooks,
        )
        session_id = uuid.uuid4().hex
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        notebook = settings.notebook_dir / f"{stamp}-acp-{session_id[:8]}.ipynb"
        target = self.target
        if target is not None and not target.path:  # the first prompt names the notebook
            self.sessions[session_id] = _Entry(None, notebook, settings)
        else:
            agent = self._agent(session_id, settings, notebook, target)
            self.sessions[session_id] = _Entry(agent, notebook, settings, target)
        return S.NewSessionResponse(session_id=session_id)

    def _agent(
        self, session_id: str, settings: Settings, notebook: Path, target: JupyterTarget | None
    ) -> AsyncAgent:
        """The session's agent: reused by every prompt, so follow-ups share the kernel and
        the conversation."""
        from ..agent import AsyncAgent

        async def approve(code: str, step: int) -> tuple[str, str | None]:
            return await self._ask(session_id, code, step)

        provenance = {"source": "acp", "client": dict(self.client)}
        executor = target.executor(settings) if target is not None else None
        return AsyncAgent(
            settings,
            executor=executor,
            notebook=notebook,
            approve=approve if self.approve else None,  # type: ignore[arg-type]  # awaited
            provenance=provenance,
        )

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> S.PromptResponse:
        entry = self._entry(session_id)
        if entry.work is not None and not entry.work.done():
            raise acp.RequestError.invalid_request(
                {"details": "a prompt is already running in this session"}
            )
        task = prompt_text(prompt).strip()
        if not task:
            raise acp.RequestError.invalid_params({"details": "the prompt has no text"})
        entry.cancelled = False
        entry.work = work = asyncio.ensure_future(self._run(session_id, entry, task, prompt))
        return await work

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        entry = self.sessions.get(session_id)
        if entry is not None and entry.work is not None and not entry.work.done():
            entry.cancelled = True
            entry.work.cancel()

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        entry = self.sessions.pop(session_id, None)
        if entry is not None:
            if entry.work is not None:
                entry.work.cancel()
            if entry.agent is None:
                return
            executor = entry.agent.executor
            await entry.agent.close()
            if entry.target is not None and executor is not None:
                await executor.shutdown()  # leaves the notebook's kernel running

    async def close(self) -> None:
        """Stop every session's kernel (the connection is gone)."""
        for session_id in list(self.sessions):
            await self.close_session(session_id)

    def _entry(self, session_id: str) -> _Entry:
        entry = self.sessions.get(session_id)
        if entry is None:
            raise acp.RequestError.invalid_params({"details": "no such session"})
        return entry

    async def _send(self, session_id: str, updates: AcpUpdates) -> None:
        for update in updates.take():
            await self._conn.session_update(session_id=session_id, update=update)

    async def _ask(self, session_id: str, code: str, step: int) -> tuple[str, str | None]:
        """``--approve``: the client's permission before the cell (its tool call pending)."""
        entry = self._entry(session_id)
        updates = entry.updates
        assert updates is not None
        cell = updates.announce(step, code)
        await self._send(session_id, updates)
        if entry.always:
            return "run", code
        answer = await self._conn.request_permission(
            session_id=session_id,
            tool_call=updates.permission_call(cell, step),
            options=PERMISSION_OPTIONS,
        )
        outcome = answer.outcome
        if getattr(outcome, "outcome", None) != "selected":
            return "quit", None  # the prompt turn was cancelled
        if outcome.option_id == "stop":
            return "quit", None
        if outcome.option_id == "allow_always":
            entry.always = True
        return ("run", code) if outcome.option_id.startswith("allow") else ("skip", None)

    def _bind(self, entry: _Entry, session_id: str, prompt: list[Any]) -> AsyncAgent:
        """The session's agent; with ``--jupyter-url`` and no ``--notebook``, on the
        notebook its first prompt names (a later prompt cannot move it)."""
        target = self.target
        if target is None or target.path:
            assert entry.agent is not None
            return entry.agent
        named = notebook_named(prompt)
        if entry.agent is not None:
            assert entry.target is not None
            if named is not None and named != entry.target.path:
                raise ConfigError(
                    f"this chat works in {entry.target.path}: start a new chat for {named}"
                )
            return entry.agent
        if named is None:
            raise ConfigError(
                "which notebook? attach it to your message (a link to the .ipynb) or open it"
            )
        entry.target = replace(target, path=named)
        entry.agent = self._agent(session_id, entry.settings, entry.notebook, entry.target)
        return entry.agent

    async def _run(
        self, session_id: str, entry: _Entry, task: str, prompt: list[Any]
    ) -> S.PromptResponse:
        entry.turns += 1
        try:
            agent = self._bind(entry, session_id, prompt)
        except KernelAgentError as exc:
            raise acp.RequestError(-32602, f"kernel-agent: {_one_sentence(exc)}") from None
        where = entry.target.path if entry.target is not None else ""
        entry.updates = updates = AcpUpdates(entry.turns, where)
        try:
            if entry.target is not None:
                task = await self._with_notebook(entry, agent, task)
            async for event in agent.run(task):
                updates(event)
                await self._send(session_id, updates)
        except asyncio.CancelledError:
            updates.interrupted()
            updates._say(
                "\n\nInterrupted; the kernel keeps its state. "
                f"notebook: {fenced_inline(str(entry.notebook))}"
            )
            with contextlib.suppress(Exception):  # the client may be gone
                await asyncio.shield(self._send(session_id, updates))
            if entry.cancelled:
                return S.PromptResponse(stop_reason="cancelled")
            raise
        except KernelAgentError as exc:
            if agent.state is None:  # it never started: the next prompt starts afresh
                await agent.close()
                entry.agent = self._agent(session_id, entry.settings, entry.notebook, entry.target)
            raise acp.RequestError(-32603, f"kernel-agent: {_one_sentence(exc)}") from None
        result = updates.result
        status = result.status if result is not None else "error"
        # every update is on the wire; a beat before the turn ends, since clients that
        # handle notifications in tasks (Jupyter AI's) may otherwise end the turn first and
        # miss the answer's last chunk (seen: the chat's reply read before it arrived)
        await asyncio.sleep(_SETTLE_S)
        return S.PromptResponse(stop_reason=_STOP_REASONS.get(status, "end_turn"))

    async def _with_notebook(self, entry: _Entry, agent: AsyncAgent, task: str) -> str:
        """With ``--jupyter-url``: the task with what the open notebook holds; the first
        time, its cells start the transcript (so the clean notebook re-runs from the top)."""
        from ..jupyter.context import notebook_context, record_user_cells, with_context

        executor: Any = agent.executor
        if executor is None or not executor.language_info:
            await agent.start(task)
            executor = agent.executor
        text, namespace = await notebook_context(executor)
        if not entry.seeded:
            assert agent.state is not None
            record_user_cells(agent.state.transcript, executor.doc)
            entry.seeded = True
        return with_context(task, text, namespace)


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The protocol's streams: stdin, and the real stdout; file descriptor 1 then points at
    stderr, so nothing else written to stdout (a library's print) can break the protocol."""
    import os
    import sys

    loop = asyncio.get_running_loop()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
    transport, _ = await loop.connect_write_pipe(lambda: protocol, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve_stdio(
    settings: Settings, *, approve: bool = False, target: JupyterTarget | None = None
) -> None:
    """Serve ACP on stdin/stdout until the client closes the connection."""
    agent = KernelAgentAcp(settings, approve=approve, target=target)
    reader, writer = await _stdio()
    served: Any = agent  # implements the methods of acp.Agent that it announces
    try:
        await acp.run_agent(served, writer, reader)
    finally:
        await agent.close()
