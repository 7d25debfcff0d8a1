"""Talking to a Jupyter Kernel Gateway / Enterprise Gateway: REST calls and the channels websocket.

:class:`GatewayREST` makes the few REST calls (in a worker thread, so the event
loop never blocks) and turns every failure into a one-line
:class:`~kernel_agent.errors.GatewayError`.

:class:`Channels` is one ``/api/kernels/{id}/channels`` websocket. A reader thread
blocks in ``websocket-client``'s ``recv`` and hands the messages we asked for to
the event loop. Speed comes from three socket details, measured on loopback
(``pass`` per cell: 44 ms without them, ~3 ms with them):

- ``TCP_NODELAY`` on our socket, so our small request frames leave at once;
- ``TCP_QUICKACK`` re-armed before every read, so we ACK the gateway's frames at
  once: the gateway (Tornado) writes each kernel message as its own small segment
  with Nagle on, and our delayed ACK would otherwise hold its next write ~40 ms;
- ``skip_utf8_validation`` (and the binary v1 framing), so no pure-Python UTF-8
  check runs over large outputs.

An asyncio websocket library cannot re-arm QUICKACK per read, which is why this is
a thread around ``websocket-client`` (see NOTES-gateway.md for the figures).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import websocket

from ..errors import AuthRefused, GatewayError, GatewayStatus, SendFailed, Unreachable, one_line
from .gateway_wire import V1_PROTOCOL, decode, encode, peek_parent_id
from .messages import checked

__all__ = [
    "GatewayREST",
    "Channels",
    "Disconnected",
    "ws_url",
]

log = logging.getLogger(__name__)

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
#: websocket subprotocols we offer; the gateway picks one or falls back to legacy JSON
OFFERED_SUBPROTOCOLS = [V1_PROTOCOL]


def ws_url(base_url: str, path: str) -> str:
    """``http(s)://host/prefix`` + ``path`` as a ``ws(s)://`` URL."""
    parts = urlsplit(base_url)
    scheme = {"https": "wss", "wss": "wss"}.get(parts.scheme, "ws")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, "", ""))


def _http_message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
        detail = body.get("message") or body.get("reason") or ""
    except (ValueError, OSError, AttributeError):
        detail = ""
    return one_line(f"HTTP {exc.code} {detail}".strip())


class GatewayREST:
    """The gateway's REST API with token auth; every error becomes a one-line GatewayError."""

    def __init__(self, url: str, token: str | None, request_timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise GatewayError(f"gateway URL must look like http://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self.token = token
        self.request_timeout = request_timeout

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def auth_failure(self, code: int, detail: str = "") -> AuthRefused:
        if code == 403 and detail:
            # Enterprise Gateway answers 403 with its reason for a user it refuses
            # ("User 'root' is not authorized ...", KERNEL_USERNAME) or a kernel limit.
            return AuthRefused(f"the gateway at {self.url} refused the request ({detail})")
        what = "a wrong token" if self.token else "no token"
        return AuthRefused(
            f"the gateway at {self.url} refused {what} (HTTP {code}): "
            "set --gateway-token or KERNEL_AGENT_GATEWAY_TOKEN"
        )

    def unreachable(self, reason: object) -> Unreachable:
        return Unreachable(f"cannot reach the gateway at {self.url}: {one_line(str(reason))}")

    def _call(self, method: str, path: str, body: Any, timeout: float | None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {**self.headers, "Content-Type": "application/json"}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.request_timeout) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                detail = _http_message(exc) if exc.code == 403 else ""
                raise self.auth_failure(exc.code, detail if detail != "HTTP 403" else "") from None
            raise GatewayStatus(exc.code, _http_message(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            raise self.unreachable(getattr(exc, "reason", exc)) from None
        try:
            return json.loads(payload) if payload else None
        except ValueError:
            raise GatewayError(
                f"{self.url} answered {method} {path} with something other than JSON: "
                "is this a Jupyter Kernel Gateway?"
            ) from None

    async def call(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> Any:
        """``method path`` -> parsed JSON; raises GatewayError, or GatewayStatus (other HTTP)."""
        return await asyncio.to_thread(self._call, method, path, body, timeout)

    # ------------------------------------------------------------------ API
    async def kernelspecs(self) -> dict[str, Any]:
        try:
            specs = await self.call("GET", "/api/kernelspecs")
        except GatewayStatus as exc:
            raise GatewayError(
                f"{self.url} is not a Jupyter Kernel Gateway (GET /api/kernelspecs: {exc.message})"
            ) from None
        if not isinstance(specs, dict) or "kernelspecs" not in specs:
            raise GatewayError(f"{self.url} is not a Jupyter Kernel Gateway (no kernelspecs)")
        return specs

    async def start_kernel(self, name: str, env: dict[str, str], timeout: float) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if env:
            body["env"] = env
        try:
            return await self.call("POST", "/api/kernels", body, timeout=timeout)
        except GatewayStatus as exc:
            raise GatewayError(
                f"the gateway at {self.url} could not start a {name!r} kernel: {exc.message}"
            ) from None

    async def kernel(self, kernel_id: str) -> dict[str, Any] | None:
        """The kernel's model, or None if the gateway does not know it (404)."""
        try:
            return await self.call("GET", f"/api/kernels/{quote(kernel_id)}", timeout=5.0)
        except GatewayStatus as exc:
            if exc.code == 404:
                return None
            raise GatewayError(
                f"the gateway at {self.url} failed to report kernel {kernel_id}: {exc.message}"
            ) from None

    async def kernel_action(
        self, kernel_id: str, action: str, timeout: float | None = None
    ) -> None:
        try:
            await self.call(
                "POST", f"/api/kernels/{quote(kernel_id)}/{action}", {}, timeout=timeout
            )
        except GatewayStatus as exc:
            raise GatewayError(
                f"the gateway at {self.url} failed to {action} kernel {kernel_id}: {exc.message}"
            ) from None

    async def delete_kernel(self, kernel_id: str) -> None:
        try:
            await self.call("DELETE", f"/api/kernels/{quote(kernel_id)}")
        except GatewayStatus as exc:
            if exc.code != 404:
                what = f"failed to shut down kernel {kernel_id}"
                raise GatewayError(f"the gateway at {self.url} {what}: {exc.message}") from None


class Disconnected:
    """Put in the inbox when the websocket closes; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Inbox:
    """Thread -> event loop hand-off: a deque plus at most one waiting future."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None

    def put(self, item: Any) -> None:
        with self._lock:
            self._items.append(item)
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, future = waiter
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                pass

    def __len__(self) -> int:
        return len(self._items)

    def put_back(self, item: Any) -> None:
        """Return ``item`` (unless None) to the front: the next ``get`` has it again."""
        if item is not None:
            with self._lock:
                self._items.appendleft(item)

    def pop_nowait(self) -> Any:
        with self._lock:
            return self._items.popleft() if self._items else None

    async def get(self, timeout: float) -> Any:
        """The next item, or None after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._items:
                return self._items.popleft()
            future: asyncio.Future[None] = loop.create_future()
            self._waiter = (loop, future)
        timer = loop.call_later(max(timeout, 0.0), _wake, future)
        try:
            await future
        finally:
            timer.cancel()
            with self._lock:
                if self._waiter is not None and self._waiter[1] is future:
                    self._waiter = None
        return self.pop_nowait()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Channels:
    """One channels websocket. Only messages whose parent is in ``expected``, and
    ``restarting``/``dead`` status messages, reach the inbox; the rest (other
    clients' output, the server's own kernel_info nudges) are dropped in the thread.
    """

    def __init__(self, url: str, headers: dict[str, str], session_id: str) -> None:
        self.url = f"{url}?session_id={quote(session_id)}"
        self.headers = headers
        self.expected: set[str] = set()
        #: the parentless kernel statuses handed on (they say the kernel's state is gone)
        self.death_states: tuple[str, ...] = ("restarting", "dead")
        self.inbox = _Inbox()
        self.protocol: str | None = None
        self._ws: websocket.WebSocket | None = None
        self._reader: threading.Thread | None = None
        self.closed = True
        #: time.monotonic() when bytes last came in (any frame, or part of one)
        self.last_heard = 0.0
        #: messages dropped for their shape (the reader thread counts them)
        self.malformed = 0

    @property
    def sock(self) -> socket.socket | None:
        """The TCP socket (tests drop it to simulate a broken connection)."""
        return self._ws.sock if self._ws is not None else None

    def connect(self, timeout: float, on_auth_failure: Callable[[int], GatewayError]) -> None:
        """Open the websocket (blocking: run it in a thread) and start the reader."""
        sockopt = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        try:
            ws = websocket.create_connection(
                self.url,
                header=[f"{k}: {v}" for k, v in self.headers.items()],
                subprotocols=OFFERED_SUBPROTOCOLS or None,
                sockopt=sockopt,
                skip_utf8_validation=True,
                enable_multithread=True,
                timeout=timeout,
            )
        except websocket.WebSocketBadStatusException as exc:
            if exc.status_code in (401, 403):
                raise on_auth_failure(exc.status_code) from None
            raise GatewayError(
                f"the gateway refused the kernel websocket {self.url} (HTTP {exc.status_code})"
            ) from None
        except (websocket.WebSocketException, OSError) as exc:
            raise Unreachable(
                f"cannot open the kernel websocket {self.url}: {one_line(str(exc))}"
            ) from None
        ws.settimeout(None)
        self.protocol = ws.getsubprotocol()
        self._note_progress(ws)
        self._ws = ws
        self.closed = False
        self._reader = threading.Thread(
            target=self._read, args=(ws,), name="gateway-ws", daemon=True
        )
        self._reader.start()

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        """Send one message (a small blocking write; the websocket lock keeps frames whole)."""
        if self._ws is None or self.closed:
            raise SendFailed("the websocket is closed")
        frame = encode(channel, msg, self.protocol)
        opcode = (
            websocket.ABNF.OPCODE_BINARY if isinstance(frame, bytes) else websocket.ABNF.OPCODE_TEXT
        )
        try:
            self._ws.send(frame, opcode)
        except (websocket.WebSocketException, OSError) as exc:
            raise SendFailed(str(exc)) from None

    def ping(self) -> None:
        """Send a websocket ping (the pong, or any other frame, moves ``last_heard``)."""
        if self._ws is None or self.closed:
            return
        try:
            self._ws.ping()
        except (websocket.WebSocketException, OSError):
            pass  # the reader sees the broken socket and reports it

    def _note_progress(self, ws: websocket.WebSocket) -> None:
        """Move ``last_heard`` on every chunk read, so a long frame still shows progress."""
        self.last_heard = time.monotonic()
        buffer = getattr(ws, "frame_buffer", None)
        recv = getattr(buffer, "recv", None)
        if recv is None:
            return

        def counting_recv(bufsize: int) -> bytes:
            data = recv(bufsize)
            self.last_heard = time.monotonic()
            return data

        buffer.recv = counting_recv  # type: ignore[union-attr]

    def close(self) -> None:
        """Close the websocket and stop the reader thread."""
        ws, self._ws = self._ws, None
        self.closed = True
        if ws is None:
            return
        try:
            ws.send_close()
        except (websocket.WebSocketException, OSError):
            pass
        try:
            ws.abort()  # wakes the reader blocked in recv
        except (websocket.WebSocketException, OSError):
            pass
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        ws.shutdown()

    def _read(self, ws: websocket.WebSocket) -> None:
        sock = ws.sock
        reason = "the gateway closed the websocket"
        try:
            while True:
                if _QUICKACK is not None and sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
                opcode, frame = ws.recv_data(control_frame=True)
                self.last_heard = time.monotonic()
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    break
                if opcode in (websocket.ABNF.OPCODE_PING, websocket.ABNF.OPCODE_PONG):
                    continue
                try:
                    self._route(frame, opcode == websocket.ABNF.OPCODE_TEXT)
                except Exception as exc:  # bad JSON, JSON nested too deep, a wrong shape
                    self.malformed += 1
                    log.warning(
                        "dropped a malformed message from the gateway: %s", type(exc).__name__
                    )
        except (websocket.WebSocketException, OSError) as exc:
            reason = one_line(str(exc)) or type(exc).__name__
        finally:
            if self._ws is ws:
                self.closed = True
                self.inbox.put(Disconnected(reason))

    def _route(self, frame: bytes, text: bool) -> None:
        parent = peek_parent_id(frame, self.protocol, text=text)
        if parent in self.expected:
            self.inbox.put(_checked(decode(frame, self.protocol, text=text)))
        elif not parent:
            msg = _checked(decode(frame, self.protocol, text=text))
            state = msg["content"].get("execution_state")
            if msg["msg_type"] == "status" and state in self.death_states:
                self.inbox.put(msg)


def _checked(msg: Any) -> dict[str, Any]:
    kept = checked(msg)
    if kept is None or not isinstance(kept.get("channel"), str):
        raise ValueError("a message of the wrong shape")
    return kept
