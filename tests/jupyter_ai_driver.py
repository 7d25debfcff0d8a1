"""Drive ``kernel-agent acp`` through Jupyter AI's own ACP client (``JaiAcpClient``).

Run by the lab venv's Python (``make lab-venv``: it holds ``jupyter-ai-acp-client`` and
the ``agent-client-protocol`` 0.11 it pins); the agent is a command of its own::

    .venv-lab/bin/python tests/jupyter_ai_driver.py WORK_DIR QUESTION... -- AGENT ARGV...

The chat is a real ``jupyterlab_chat`` YChat (an in-memory CRDT document); the persona
is a stand-in holding it (a real one needs a Jupyter server's persona manager).
Permission requests are answered as the chat's UI does: it reads the pending tool
call from the message metadata and resolves it (``resolve_permission``), allowing
every cell. Prints one JSON line: each prompt's stop reason and the chat's messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import sys
from types import SimpleNamespace
from typing import Any

from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from jupyterlab_chat.ychat import YChat


class Persona:
    """What JaiAcpClient asks of a persona: an id, a chat, a log, the chat's directory."""

    id = "jupyter-ai-personas::kernel-agent"

    def __init__(self, chat: YChat, work: str) -> None:
        self.chat = chat
        self.work = work
        self.log = logging.getLogger("persona")
        self.parent = SimpleNamespace(root_dir=work)

    def get_chat_dir(self) -> str:
        return self.work

    def get_mcp_settings(self) -> None:
        return None

    def set_status(self, *args: Any) -> None:
        pass

    def clear_status(self) -> None:
        pass

    def update_acp_session_usage(self, *args: Any) -> None:
        pass

    def _sync_awareness_usage(self) -> None:
        pass


async def click_allow(client: JaiAcpClient, chat: YChat, session_id: str) -> None:
    """Answer each pending permission as a user clicking its first allow button."""
    while True:
        await asyncio.sleep(0.1)
        for message in chat.get_messages():
            for call in (message.metadata or {}).get("tool_calls", []):
                if call.get("permission_status") == "pending":
                    client.resolve_permission(session_id, call["tool_call_id"], "allow_once")


async def main(work: str, questions: list[str], argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=2**24
    )
    client = JaiAcpClient(agent_subprocess=proc, event_loop=asyncio.get_running_loop())
    chat = YChat()
    session = await client.create_session(Persona(chat, work))  # type: ignore[arg-type]
    clicker = asyncio.ensure_future(click_allow(client, chat, session.session_id))
    stops = []
    for question in questions:
        reply = await client.prompt_and_reply(session.session_id, question)
        stops.append(reply.stop_reason)
    clicker.cancel()
    await asyncio.sleep(0.5)  # session updates still in flight when the reply came
    messages = [dataclasses.asdict(m) for m in chat.get_messages()]
    print(json.dumps({"stops": stops, "messages": messages}))
    assert proc.stdin is not None
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 30)
    os._exit(0)  # JaiAcpClient's own background tasks do not end on cancellation


if __name__ == "__main__":
    split = sys.argv.index("--")
    asyncio.run(main(sys.argv[1], sys.argv[2:split], sys.argv[split + 1 :]))
