"""What one client may hold of ``mcp --http``: a few MCP sessions, never the SDK's 10,000.

The SDK opens a session for every ``initialize`` and keeps it until it idles out (30 min
by default); at its cap every newcomer gets 503. :class:`SessionCap` (ASGI middleware in
front of the SDK's app, behind the token check) keeps at most ``total`` sessions, at most
``per_client`` per client address. When a new session would go over, the session least
recently used that has no request in progress is ended (a ``DELETE`` through the SDK's
own app, so its client gets 404 and may initialize again), and the newcomer gets in; only
when every session is busy does it get 503. A listening ``GET`` stream is not work in
progress. Only a ``POST`` can open a session: any other method without a session id is
answered here (405 or 400), so ``OPTIONS`` never reaches the SDK; nor does any path but
the endpoint's (404). Its answers are JSON ``{"error": ...}``.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["SessionCap", "MCP_IDLE_S", "MCP_SESSIONS"]

#: sessions at most, and the seconds a session with no request lives on
MCP_SESSIONS = 32
MCP_IDLE_S = 600.0
_HEADER = b"mcp-session-id"


@dataclass
class _Held:
    client: str
    used: float
    busy: int = 0


class SessionCap:
    def __init__(
        self, app: Any, *, path: str = "/mcp", total: int = MCP_SESSIONS,
        per_client: int | None = None,
    ) -> None:  # fmt: skip
        self.app = app
        self.path = path
        self.total = total
        self.per_client = per_client or max(1, total // 2)
        self.sessions: OrderedDict[str, _Held] = OrderedDict()  # least recently used first
        self.evicted = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") != self.path:
            await _answer(send, 404, f"no such route: the MCP endpoint is {self.path}")
            return
        headers = dict(scope.get("headers") or [])
        sid = headers.get(_HEADER, b"").decode("latin-1")
        method = scope["method"]
        if not sid:
            if method != "POST":
                status = 405 if method not in ("GET", "DELETE") else 400
                await _answer(send, status, f"{method} needs an {_HEADER.decode()} header")
                return
            await self._open(scope, receive, send)
            return
        held = self.sessions.get(sid)
        if held is None or method != "POST":
            await self.app(scope, receive, send)
            if held is not None and method == "DELETE":
                self.sessions.pop(sid, None)
            return
        held.busy += 1
        self.sessions.move_to_end(sid)
        try:
            await self.app(scope, receive, send)
        finally:
            held.busy -= 1
            held.used = time.monotonic()

    async def _open(self, scope: Any, receive: Any, send: Any) -> None:
        client = (scope.get("client") or ("",))[0]
        if len(self.sessions) >= self.total and not await self._evict(None, scope):
            await _answer(send, 503, "every MCP session is busy; try again later")
            return
        mine = sum(1 for h in self.sessions.values() if h.client == client)
        if mine >= self.per_client and not await self._evict(client, scope):
            await _answer(send, 503, "this client's MCP sessions are all busy; try again later")
            return

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                sid = dict(message.get("headers") or []).get(_HEADER, b"").decode("latin-1")
                if sid:
                    self.sessions[sid] = _Held(client, time.monotonic())
            await send(message)

        await self.app(scope, receive, watch)

    async def _evict(self, client: str | None, scope: Any) -> bool:
        """End the least recently used idle session (of ``client``, if given)."""
        for sid, held in list(self.sessions.items()):
            if held.busy or (client is not None and held.client != client):
                continue
            self.sessions.pop(sid, None)
            self.evicted += 1
            await self._delete(sid, scope)
            return True
        return False

    async def _delete(self, sid: str, scope: Any) -> None:
        sent = False

        async def receive() -> Any:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Any) -> None:
            return None

        keep = [(k, v) for k, v in scope.get("headers") or [] if k in (b"host", b"authorization")]
        ending = {**scope, "method": "DELETE", "headers": [*keep, (_HEADER, sid.encode())]}
        await self.app(ending, receive, discard)


async def _answer(send: Any, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 405:
        headers.append((b"allow", b"GET, POST, DELETE"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
