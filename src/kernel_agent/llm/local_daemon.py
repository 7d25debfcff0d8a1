"""The local model server process: llama-cpp-python's app, plus auth, stats and keep-alive.

Started by :mod:`kernel_agent.llm.local_server` as ``python -m kernel_agent.llm.local_daemon
--ready-fd N`` with a JSON config on stdin (never in argv, which other users can read):

- ``model``: llama-cpp-python ``ModelSettings`` keywords (path, alias, threads, cache ...);
- ``tune_threads``: thread counts to choose from by measured speed (see
  :mod:`.local_threads`), or null to keep ``model``'s;
- ``api_key``: the bearer token every request must carry;
- ``keep_alive``: seconds idle before exiting, or null to run until stopped;
- ``lease``: a file that clients hold a shared ``flock`` on while they use the server;
  the server is idle only when nobody holds it and no request ran for ``keep_alive``;
- ``state``: where to write ``{"pid", "port", "token", ...}`` once ready (removed on exit);
- ``detach``: fork once more so the server is nobody's child (no zombie, no parent death).

It binds a free loopback port itself (no window for another user to take the port
between choosing and binding it). It writes its pid to the ready fd at once, then
the port once the model is loaded and the socket listens.
``GET /kernel-agent/stats`` (authenticated) answers llama.cpp's own counters: prompt
tokens evaluated and generated, and the milliseconds they took.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hmac
import json
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from .local_state import try_flock

__all__ = ["HOST", "STATS_PATH", "main"]

HOST = "127.0.0.1"
STATS_PATH = "/kernel-agent/stats"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class ActivityTracker:
    """ASGI middleware: counts requests in flight, notes when the last one ended,
    and answers :data:`STATS_PATH` itself (which is not activity: asking for the
    stats, as ``kernel-agent local status`` does, does not keep the server alive)."""

    def __init__(
        self,
        app: App,
        api_key: str,
        stats: Callable[[], dict[str, Any]],
        keep_alive: float | None = None,
    ) -> None:
        self.app = app
        self._key = f"Bearer {api_key}".encode()
        self._stats = stats
        self.keep_alive = keep_alive
        self.in_flight = 0
        self.last_activity = time.monotonic()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") == STATS_PATH:
            await self._answer_stats(scope, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.last_activity = time.monotonic()

    @property
    def busy(self) -> bool:
        return self.in_flight > 0

    async def _answer_stats(self, scope: Scope, send: Send) -> None:
        auth = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(auth, self._key):
            own = {
                "in_flight": self.in_flight,
                "idle_s": round(time.monotonic() - self.last_activity, 3),
                "keep_alive": self.keep_alive,
            }
            status, body = 200, json.dumps({**self._stats(), **own}).encode()
        else:
            status, body = 401, b'{"detail":"Invalid API key"}'
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def llama_stats() -> dict[str, Any]:
    """llama.cpp's cumulative counters for the loaded model (zeros before it is loaded)."""
    import llama_cpp
    from llama_cpp.server import app as server_app

    proxy = getattr(server_app, "_llama_proxy", None)
    llama = getattr(proxy, "_current_model", None)
    ctx = getattr(getattr(llama, "_ctx", None), "ctx", None)
    if ctx is None:
        return {"n_p_eval": 0, "t_p_eval_ms": 0.0, "n_eval": 0, "t_eval_ms": 0.0}
    data = llama_cpp.llama_perf_context(ctx)
    return {
        "n_p_eval": data.n_p_eval,
        "t_p_eval_ms": data.t_p_eval_ms,
        "n_eval": data.n_eval,
        "t_eval_ms": data.t_eval_ms,
        "n_tokens": int(getattr(llama, "n_tokens", 0)),  # tokens now in the KV cache
    }


def _tune_threads(choices: list[int]) -> Callable[[], dict[str, Any]]:
    """Let the loaded model's thread count follow its measured speed (see
    :mod:`.local_threads`); the stats then also say what it measured."""
    from llama_cpp.server import app as server_app

    from .local_threads import ThreadTuner, install

    tuner = ThreadTuner([int(n) for n in choices])
    install(server_app._llama_proxy._current_model, tuner)  # type: ignore[union-attr]

    def stats() -> dict[str, Any]:
        ms = {str(n): round(1000 * s, 2) for n, s in sorted(tuner.cost.items())}
        return {**llama_stats(), "threads": tuner.best, "ms_per_token": ms}

    return stats


def remove_state(path: Path, pid: int) -> None:
    """Remove the state file if it still describes this process."""
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()


def write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)


async def serve(config: dict[str, Any], ready_fd: int) -> None:
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    token: str = config["api_key"]
    keep_alive: float | None = config.get("keep_alive")
    lease = Path(config["lease"]) if config.get("lease") else None
    state = Path(config["state"]) if config.get("state") else None
    pid = os.getpid()
    os.write(ready_fd, f"{pid}\n".encode())  # first the pid: a launcher that gives up kills it
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    port = int(sock.getsockname()[1])
    app = create_app(  # loads the model
        server_settings=ServerSettings(
            host=HOST, port=port, api_key=token, interrupt_requests=False
        ),
        model_settings=[ModelSettings(**config["model"])],
    )
    stats = llama_stats
    if config.get("tune_threads"):
        stats = _tune_threads(config["tune_threads"])
    tracker = ActivityTracker(app, token, stats, keep_alive)
    server = uvicorn.Server(
        uvicorn.Config(tracker, log_level="warning", access_log=False, lifespan="off")
    )

    async def watch() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.02)
        if state is not None:
            write_state(
                state,
                {"pid": pid, "port": port, "token": token, "model": config["model"]["model"]},
            )
        os.write(ready_fd, f"{port}\n".encode())
        os.close(ready_fd)
        if keep_alive is None:
            return
        tick = min(1.0, max(keep_alive / 4, 0.05))
        while not server.should_exit:
            await asyncio.sleep(tick)
            if tracker.busy or time.monotonic() - tracker.last_activity < keep_alive:
                continue
            held = try_flock(lease, fcntl.LOCK_EX) if lease is not None else None
            if lease is not None and held is None:  # a client holds the server
                tracker.last_activity = time.monotonic()
                continue
            # idle: say so before the port closes, and keep the lease locked while exiting
            if state is not None:
                remove_state(state, pid)
            server.should_exit = True

    watcher = asyncio.ensure_future(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        if state is not None:
            remove_state(state, pid)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernel_agent.llm.local_daemon")
    ap.add_argument("--ready-fd", type=int, required=True)
    args = ap.parse_args(argv)
    config = json.loads(sys.stdin.read())
    if config.get("detach"):
        if os.fork() > 0:
            os._exit(0)  # the grandchild serves; nobody waits for it, init reaps it
        os.setsid()  # its own process group, so it can be signalled as one
    os.chdir("/")
    asyncio.run(serve(config, args.ready_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
