"""Drive kernel-agent acp through Jupyter AI's own ACP client (JaiAcpClient) and a real YChat."""

import asyncio
import json
import logging
import os
import sys
from types import SimpleNamespace

from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from jupyterlab_chat.ychat import YChat


class Persona:
    """What JaiAcpClient asks of the persona that owns a session (the persona manager's part)."""

    id = "jupyter-ai-personas::kernel-agent"

    def __init__(self, chat, root):
        self.chat = chat
        self.parent = SimpleNamespace(root_dir=root)
        self.log = logging.getLogger("persona")
        self.root = root

    def get_mcp_settings(self):
        return None

    def get_chat_dir(self):
        return self.root

    def __getattr__(self, name):  # status, usage, slash commands, awareness: no-ops here
        return lambda *a, **k: None


async def main(argv, root, question):
    loop = asyncio.get_running_loop()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=64 * 1024 * 1024
    )
    client = JaiAcpClient(agent_subprocess=proc, event_loop=loop)
    chat = YChat()
    persona = Persona(chat, root)
    session = await client.create_session(persona)
    await client.prompt_and_reply(session.session_id, question)
    # the client handles each session update in a task of its own: let them land
    messages, still = [], 0
    for _ in range(150):
        await asyncio.sleep(0.1)
        now = [{"sender": m.sender, "body": m.body} for m in chat.get_messages()]
        still = still + 1 if now == messages and now else 0
        messages = now
        if still >= 10:
            break
    print(json.dumps(messages), flush=True)
    proc.stdin.close()  # the agent's end: it closes its sessions and exits
    try:
        await asyncio.wait_for(proc.wait(), 20)
    except asyncio.TimeoutError:
        proc.kill()
    # JaiAcpClient's own background tasks do not end on cancellation: leave without them
    os._exit(0)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    spec = json.loads(sys.argv[1])

    async def guarded():
        try:
            await main(spec["argv"], spec["root"], spec["question"])
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)

    asyncio.run(guarded())
