"""``kernel-agent acp``: the agent behind the Agent Client Protocol (official ``acp`` SDK).

An ACP client (Jupyter AI v3's persona through ``jupyter-ai-acp-client``, Zed, any
editor) starts ``kernel-agent acp`` and talks JSON-RPC over its stdin/stdout. Each ACP
session is one :class:`~kernel_agent.agent.AsyncAgent` with one kernel: with
``--jupyter-url``/``--notebook``, the kernel of the notebook open in JupyterLab (each
cell appears there as it runs); else a sandboxed kernel of its own, as ``run``'s.

What the client sees of a prompt (the loop's events, mapped here and nowhere else):

- the model's words as they stream: ``agent_message_chunk`` updates;
- each cell: a ``tool_call`` (kind ``execute``, the code) that goes ``in_progress``,
  then ``completed`` or ``failed`` with the cell's text output (bounded);
- ``--approve``: before each cell, ``session/request_permission`` with run / skip /
  stop options; a cancelled request stops the run;
- the answer, if it is not the text just streamed, and the transcript's path;
- ``session/cancel``: the run stops (the kernel keeps its state); the stop reason is
  ``cancelled``.

With ``--jupyter-url`` and no ``--notebook`` (Jupyter AI's kernel-agent persona, one
process for every chat), each session works in the notebook its first prompt names: a
``resource_link`` block whose URI is the notebook's path as the server names it
(``dir/name.ipynb``, no scheme). A later prompt naming another notebook is refused in one
line (a new chat works there).

A failure (the model, the kernel, the Jupyter server) ends the prompt with a one-line
message to the client, and the process keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import AgentCapabilities, Implementation, PermissionOption, ToolCallUpdate

from ..errors import ConfigError, KernelAgentError, one_line
from ..events import Answer, CellFinished, CellSkipped, CellStarted, ModelDelta, RunFinished
from ..version import __version__

if TYPE_CHECKING:
    from ..agent import AsyncAgent
    from ..jupyter.attach import JupyterTarget
    from ..results import CellResult
    from ..settings import Settings

__all__ = ["KernelAgentACP", "OUTPUT_CHARS"]

log = logging.getLogger(__name__)

#: characters of a cell's text output shown in its tool-call report
OUTPUT_CHARS = 4000

_OPTIONS = [
    PermissionOption(option_id="run", name="Run this cell", kind="allow_once"),
    PermissionOption(option_id="skip", name="Skip this cell", kind="reject_once"),
    PermissionOption(option_id="quit", name="Stop the run", kind="reject_always"),
]


@dataclass
class _Session:
    agent: AsyncAgent | None  # None until the first prompt names the notebook
    target: JupyterTarget | None
    running: asyncio.Task[Any] | None = None
    seeded: bool = False
    streamed: list[str] = field(default_factory=list)


def _cell_text(result: CellResult) -> str:
    """A cell's outputs as text for the client (text/plain and streams, bounded)."""
    parts: list[str] = []
    for output in result.outputs:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(str(output.get("text", "")))
        elif kind in ("execute_result", "display_data"):
            data = output.get("data") or {}
            plain = data.get("text/plain")
            parts.append(str(plain) if plain else f"[{', '.join(sorted(data))}]")
        elif kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
    text = "\n".join(p.rstrip("\n") for p in parts if p)
    if result.error is not None and result.error.ename not in text:
        text += f"\n{result.error.ename}: {result.error.evalue}"
    if len(text) > OUTPUT_CHARS:
        text = text[:OUTPUT_CHARS] + f"\n... ({len(text) - OUTPUT_CHARS} more characters)"
    return text.strip()


class KernelAgentACP:
    """The ACP agent: one :class:`AsyncAgent` per ACP session."""

    def __init__(
        self, settings: Settings, *, target: JupyterTarget | None = None, approve: bool = False
    ) -> None:
        self.settings = settings
        self.target = target
        self.approve = approve
        self.sessions: dict[str, _Session] = {}
        self._client: Any = None

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def _say(self, session_id: str, update: Any) -> None:
        await self._client.session_update(session_id=session_id, update=update)

    # ------------------------------------------------------------------ lifecycle
    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:  # fmt: skip
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="kernel-agent", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        if self.target is not None and not self.target.path:  # the first prompt names it
            self.sessions[session_id] = _Session(None, None)
            return NewSessionResponse(session_id=session_id)
        settings = self.settings
        if self.target is None and settings.cwd is None and cwd:
            settings = settings.with_(cwd=cwd)
        agent = self._agent(session_id, settings, self.target)
        self.sessions[session_id] = _Session(agent, self.target)
        return NewSessionResponse(session_id=session_id)

    def _agent(
        self, session_id: str, settings: Settings, target: JupyterTarget | None
    ) -> AsyncAgent:
        from ..agent import AsyncAgent

        async def approve(code: str, step: int) -> tuple[str, str | None]:
            return await self._ask(session_id, code, step)

        return AsyncAgent(
            settings,
            executor=target.executor(settings) if target is not None else None,
            approve=approve if self.approve else None,  # type: ignore[arg-type]  # awaited
            provenance={"front_end": "acp"},
        )

    def _bind(self, session_id: str, session: _Session, prompt: list[Any]) -> AsyncAgent:
        """The session's agent; with a notebook per session, on the one the prompt names."""
        if self.target is None or self.target.path:
            assert session.agent is not None
            return session.agent
        named = _notebook_named(prompt)
        if session.agent is not None:
            assert session.target is not None
            if named is not None and named != session.target.path:
                raise ConfigError(
                    f"this chat works in {session.target.path}: start a new chat for {named}"
                )
            return session.agent
        if named is None:
            raise ConfigError(
                "which notebook? attach it to your message (a link to the .ipynb) or open it"
            )
        session.target = replace(self.target, path=named)
        session.agent = self._agent(session_id, self.settings, session.target)
        return session.agent

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.running is not None:
            session.running.cancel()

    async def close(self) -> None:
        """Close every session's agent (an attached notebook's kernel keeps running)."""
        for session in self.sessions.values():
            if session.agent is None:
                continue
            with contextlib.suppress(Exception):
                await session.agent.close()
                if session.target is not None and session.agent.executor is not None:
                    await session.agent.executor.shutdown()

    # ------------------------------------------------------------------ a prompt
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self.sessions.get(session_id)
        if session is None:
            from acp import RequestError

            raise RequestError.invalid_params({"sessionId": "no such session"})
        texts = [getattr(b, "text", "") for b in prompt if getattr(b, "type", "") == "text"]
        task = "\n".join(str(t) for t in texts).strip()
        if not task:
            await self._say(session_id, update_agent_message_text("The prompt has no text."))
            return PromptResponse(stop_reason="end_turn")
        session.running = asyncio.current_task()
        try:
            agent = self._bind(session_id, session, prompt)
            await self._run(session_id, session, agent, task)
        except asyncio.CancelledError:
            await self._say(session_id, update_agent_message_text("\n\n(stopped)"))
            return PromptResponse(stop_reason="cancelled")
        except KernelAgentError as exc:
            message = f"\n\nkernel-agent: {one_line(str(exc))}"
            await self._say(session_id, update_agent_message_text(message))
        finally:
            session.running = None
        return PromptResponse(stop_reason="end_turn")

    async def _run(self, session_id: str, session: _Session, agent: AsyncAgent, task: str) -> None:
        if session.target is not None:
            task = await self._with_notebook(session, agent, task)
        streamed: list[str] = []
        async for event in agent.run(task):
            if isinstance(event, ModelDelta):
                streamed.append(event.text)
                await self._say(session_id, update_agent_message_text(event.text))
            elif isinstance(event, CellStarted):
                if streamed and not "".join(streamed).endswith("\n"):
                    await self._say(session_id, update_agent_message_text("\n"))
                streamed.clear()
                await self._cell_started(session_id, event.step, event.code)
            elif isinstance(event, CellFinished):
                status: Literal["completed", "failed"] = (
                    "completed" if event.result.ok else "failed"
                )
                output = _cell_text(event.result) or f"(no output; {event.result.status})"
                await self._say(
                    session_id,
                    update_tool_call(
                        _call_id(event.step),
                        status=status,
                        content=[tool_content(text_block(output))],
                        raw_output={"status": event.result.status, "text": output},
                    ),
                )
            elif isinstance(event, CellSkipped):
                await self._say(
                    session_id,
                    update_tool_call(
                        _call_id(event.step),
                        status="failed",
                        content=[tool_content(text_block("skipped"))],
                    ),
                )
            elif isinstance(event, Answer):
                if event.text.strip() and event.text.strip() != "".join(streamed).strip():
                    await self._say(session_id, update_agent_message_text("\n\n" + event.text))
            elif isinstance(event, RunFinished):
                where = event.result.notebook
                if where:
                    full = Path(where).resolve()
                    note = f"\n\n(transcript: {full}; status {event.result.status})"
                    await self._say(session_id, update_agent_message_text(note))

    async def _with_notebook(self, session: _Session, agent: AsyncAgent, task: str) -> str:
        """The task with what the open notebook holds; its cells start the transcript once."""
        from ..jupyter.context import notebook_context, record_user_cells, with_context

        executor: Any = agent.executor
        text, namespace = await notebook_context(executor)
        if not session.seeded:
            await agent.start(task)
            assert agent.state is not None
            record_user_cells(agent.state.transcript, executor.doc)
            session.seeded = True
        return with_context(task, text, namespace)

    async def _cell_started(self, session_id: str, step: int, code: str) -> None:
        content = [tool_content(text_block(f"```python\n{code}\n```"))]
        title = self._title(session_id, step)
        if self.approve:  # the call was opened by the permission request
            await self._say(
                session_id,
                update_tool_call(_call_id(step), status="in_progress", content=content),
            )
            return
        await self._say(
            session_id,
            start_tool_call(
                _call_id(step), title, kind="execute", status="in_progress",
                content=content, raw_input={"code": code},
            ),
        )  # fmt: skip

    async def _ask(self, session_id: str, code: str, step: int) -> tuple[str, str | None]:
        """``--approve``: ACP's permission request before the cell runs."""
        content = [tool_content(text_block(f"```python\n{code}\n```"))]
        title = self._title(session_id, step)
        await self._say(
            session_id,
            start_tool_call(
                _call_id(step), title, kind="execute", status="pending",
                content=content, raw_input={"code": code},
            ),
        )  # fmt: skip
        response = await self._client.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=_call_id(step), title=title, status="pending"),
            options=_OPTIONS,
        )
        outcome = response.outcome
        chosen = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else None
        if chosen == "run":
            return "run", None
        if chosen == "skip":
            return "skip", None
        return "quit", None

    def _title(self, session_id: str, step: int) -> str:
        session = self.sessions.get(session_id)
        target = session.target if session is not None else None
        return f"Run cell {step}" + (f" in {target.path}" if target is not None else "")


def _notebook_named(prompt: list[Any]) -> str | None:
    """The notebook a prompt names: its first resource link to a server path ending .ipynb."""
    from ..jupyter.server import check_notebook_path

    for block in prompt:
        uri = getattr(block, "uri", None)
        if getattr(block, "type", "") != "resource_link" or not isinstance(uri, str):
            continue
        if uri.endswith(".ipynb") and "://" not in uri and len(uri) <= 1024:
            return check_notebook_path(uri)
    return None


def _call_id(step: int) -> str:
    return f"cell-{step}"
