"""kernel-agent as a Jupyter AI v3 persona: ``@kernel-agent`` in a JupyterLab chat.

Loaded by Jupyter AI's persona manager through the ``jupyter_ai.personas`` entry point
(so only inside a Jupyter server that has ``jupyter-ai`` and ``jupyter-ai-acp-client``;
nothing else of kernel-agent imports this module). It is an ACP persona
(``BaseAcpPersona``): one ``kernel-agent acp --jupyter-url URL`` process, started by the
persona on its first message with the server's own URL, shared by every chat; the
server's token reaches it in its environment (``JUPYTER_TOKEN``), never in argv.

Which notebook a message works in, first that applies:

1. a notebook attached to the message (the chat's attach button);
2. the notebook beside the chat with the chat's name (``dir/sales.chat`` ->
   ``dir/sales.ipynb``);
3. the one notebook open in JupyterLab (the server's only notebook session).

It goes to the agent as a resource link in the prompt; the agent's session stays on it
(see :mod:`kernel_agent.frontends.acp_agent`). No notebook, or an agent that cannot
start: one line in the chat.

``KERNEL_AGENT_COMMAND`` (shell words) replaces the agent's command, default this
Python's ``-m kernel_agent``; the model comes from the server's environment
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``KERNEL_AGENT_MODEL``), as for the CLI.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults

__all__ = ["KernelAgentPersona", "agent_command"]

AVATAR = Path(__file__).with_name("kernel_agent.svg")
NAME = "kernel-agent"


def agent_command(env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    """The command that starts kernel-agent (without ``acp`` and its flags)."""
    words = shlex.split(env.get("KERNEL_AGENT_COMMAND", ""))
    return words or [sys.executable, "-m", "kernel_agent"]


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class KernelAgentPersona(BaseAcpPersona):
    """``@kernel-agent``: data analysis in the notebook you have open, in its kernel."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=[*agent_command(), "acp"], **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name=NAME,
            description="Data analysis in the notebook you have open: each cell appears "
            "there and runs in its kernel, on your variables.",
            avatar_path=str(AVATAR),
            system_prompt="unused",  # kernel-agent has its own
        )

    # ------------------------------------------------------------------ the agent process
    def _serverapp(self) -> Any:
        """The Jupyter server this persona runs in (its extension's, else the singleton)."""
        extension = getattr(self.parent, "parent", None)
        server = getattr(extension, "serverapp", None)
        if server is None:
            from jupyter_server.serverapp import ServerApp

            if not ServerApp.initialized():
                raise RuntimeError("not inside a Jupyter server")
            server = ServerApp.instance()
        return server

    async def _init_agent_subprocess(self, env: dict[str, str] | None = None) -> Any:
        """Start ``kernel-agent acp --jupyter-url <this server>``, the token in its env."""
        server = self._serverapp()
        url = str(server.connection_url).rstrip("/")
        env = dict(os.environ if env is None else env)
        token = getattr(server.identity_provider, "token", "") or ""
        env.pop("JUPYTER_TOKEN", None)
        if token:
            env["JUPYTER_TOKEN"] = token
        self._executable = [*agent_command(env), "acp", "--jupyter-url", url]
        return await super()._init_agent_subprocess(env=env)

    async def handle_uncaught_exception(self, exc: Exception) -> None:
        """A failure (the agent could not start, its process died): one line in the chat."""
        self.log.exception(exc)
        words = " ".join(self._executable[:3])
        self.send_message(
            f"kernel-agent could not answer: {type(exc).__name__}: {_one_line(str(exc))} "
            f"(agent command `{words} …`; the JupyterLab log has the details)"
        )

    # ------------------------------------------------------------------ a message
    async def process_message(self, message: Any) -> None:
        notebook = await self.notebook_for(message)
        if notebook is None:
            self.send_message(
                "kernel-agent: which notebook? Open one notebook, or attach it to your "
                "message, and ask again."
            )
            return
        client = await self.get_client()
        session_id = await self.get_session_id()
        link = SimpleNamespace(value=notebook, type="notebook", mimetype=None)
        # root_dir=None: the link's URI stays the server's path for the notebook
        await client.prompt_and_reply(
            session_id=session_id,
            prompt=str(message.body).strip(),
            attachments=[link],
            root_dir=None,
        )

    async def notebook_for(self, message: Any) -> str | None:
        """The notebook the message works in (the module's docstring says which)."""
        root = Path(self.parent.root_dir)
        for aid in getattr(message, "attachments", None) or []:
            attachment = self.chat.get_attachments().get(aid)
            value = getattr(attachment, "value", None)
            if getattr(attachment, "type", None) == "notebook" and isinstance(value, str):
                return value.lstrip("/")
        try:
            chat = Path(self.get_chat_path(relative=True))
        except Exception:  # an ephemeral chat (the REST endpoint) has no file
            chat = None
        if chat is not None and chat.suffix == ".chat":
            beside = chat.with_suffix(".ipynb")
            if (root / beside).is_file():
                return beside.as_posix()
        sessions = await self._serverapp().session_manager.list_sessions()
        open_notebooks = sorted(
            {
                str(s.get("path"))
                for s in sessions
                if s.get("type") == "notebook" and str(s.get("path", "")).endswith(".ipynb")
            }
        )
        return open_notebooks[0] if len(open_notebooks) == 1 else None
