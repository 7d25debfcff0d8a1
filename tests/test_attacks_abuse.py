"""Cheap abuse of the three servers (``serve``, ``mcp --http``, ``observe``), from the review
of 2026-11-27 (reviews/surfaces-2026-11-27.md, rows 39, 21, 22, 24, 26, 42, 45, 52), each
tried on real server subprocesses on 127.0.0.1 with raw sockets, httpx and the MCP SDK.

The acceptance property (row 39): with 1,100 idle connections open (half silent, half
with a half-sent request head), under a file limit of 1024, each server answers a real
request within 5 s, and its log stays under 1 MB.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from crossing import SRC as CHECKOUT_SRC

pytestmark = pytest.mark.timeout(300)
SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid
TOKEN = "abuse-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
IDLE = 1100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _nofile_1024() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


class Proc:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}"

    @property
    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


@contextlib.contextmanager
def server(tmp_path: Path, kind: str, *extra: str) -> Iterator[Proc]:
    """``kernel-agent serve|mcp|observe`` as a subprocess under a file limit of 1024."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
           "OPENAI_API_KEY": "sk-fake", "KERNEL_AGENT_SERVE_TOKEN": TOKEN,
           "KERNEL_AGENT_MCP_TOKEN": TOKEN}  # fmt: skip
    if kind == "serve":
        args = ["serve", "--state-dir", str(tmp_path / "state")]
    elif kind == "mcp":
        (tmp_path / "work").mkdir(exist_ok=True)
        args = ["mcp", "--http", "--cwd", str(tmp_path / "work"), "--notebook",
                str(tmp_path / "nb" / "s.ipynb")]  # fmt: skip
    else:
        (tmp_path / "runs").mkdir(exist_ok=True)
        args = ["observe", str(tmp_path / "runs")]
    log = tmp_path / f"{kind}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_agent", *args, "--port", str(port), *extra],
            env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_nofile_1024,
        )  # fmt: skip
    running = Proc(proc, port, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, running.log_text
            assert time.monotonic() < deadline, running.log_text
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def idle_connections(port: int, count: int = IDLE, budget_s: float = 90.0) -> Iterator[int]:
    """``count`` connections that never finish a request: even ones silent, odd ones
    with a half-sent head. Bounded in number and time; yields how many opened."""
    socks: list[socket.socket] = []
    deadline = time.monotonic() + budget_s
    try:
        for i in range(count):
            if time.monotonic() > deadline:
                break
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                continue
            socks.append(s)
            if i % 2:
                with contextlib.suppress(OSError):
                    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")
        yield len(socks)
    finally:
        for s in socks:
            s.close()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    return fn(), time.monotonic() - start


# ------------------------------------------------------------ row 39: slowloris
def test_serve_answers_under_1100_idle_connections(tmp_path: Path) -> None:
    with server(tmp_path, "serve") as srv, idle_connections(srv.port) as opened:
        assert opened >= IDLE - 5
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=5) as http:
            health, took = timed(lambda: http.get("/healthz"))
            assert health.status_code == 200 and took < 5
            created, took = timed(lambda: http.post("/v1/sessions", json={}))
            assert created.status_code == 201 and took < 5, created.text
            sid = created.json()["id"]
            ran, took = timed(
                lambda: http.post(f"/v1/sessions/{sid}/execute", json={"code": "print(6*7)"})
            )
            assert ran.status_code == 200 and "42" in ran.text and took < 5
    assert srv.log.stat().st_size < 1_000_000, srv.log_text[-2000:]
    assert "Traceback" not in srv.log_text


def test_mcp_answers_under_1100_idle_connections(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def call(url: str) -> str:
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=AUTH))
        client = Client(transport, client_info=types.Implementation(name="t", version="1"))
        async with client as c:
            result = await c.call_tool("run_cell", {"code": "print(6*7)"})
            return "".join(getattr(b, "text", "") for b in result.content)

    with server(tmp_path, "mcp") as srv, idle_connections(srv.port) as opened:
        assert opened >= IDLE - 5
        text, took = timed(lambda: asyncio.run(asyncio.wait_for(call(srv.url + "/mcp"), 20)))
        assert "42" in text
        # initialize + the tool call; the kernel is warm already (it started with the server)
        assert took < 5, took
    assert srv.log.stat().st_size < 1_000_000, srv.log_text[-2000:]


def test_observe_answers_under_1100_idle_connections(tmp_path: Path) -> None:
    with server(tmp_path, "observe") as srv, idle_connections(srv.port) as opened:
        assert opened >= IDLE - 5
        page, took = timed(lambda: httpx.get(srv.url + "/", timeout=5))
        assert page.status_code == 200 and took < 5
    assert srv.log.stat().st_size < 1_000_000, srv.log_text[-2000:]


def _closed_within(port: int, send: Callable[[socket.socket], None], limit: float) -> bytes:
    """What the server sent before closing a connection that ``send`` feeds."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit) as s:
        send(s)
        got = b""
        start = time.monotonic()
        while time.monotonic() - start < limit:
            try:
                chunk = s.recv(4096)
            except TimeoutError:
                break
            except ConnectionResetError:
                return got or b"<reset>"
            if not chunk:
                return got or b"<closed>"
            got += chunk
        raise AssertionError(f"still open after {limit} s: {got!r}")


def _trickle(s: socket.socket) -> None:
    """A head sent one byte at a time, never finished: data does not reset the clock."""

    def drip() -> None:
        with contextlib.suppress(OSError):
            for byte in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-aaaaaaaaaaaaaaaaaaaaaaaaaaaa":
                s.sendall(bytes([byte]))
                time.sleep(0.2)

    threading.Thread(target=drip, daemon=True).start()


def _after_a_response(s: socket.socket) -> None:
    """A keep-alive connection: one full request, then half of the next head."""
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(0.5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")


@pytest.mark.parametrize("kind", ["serve", "mcp", "observe"])
def test_connections_that_never_finish_a_head_are_closed(tmp_path: Path, kind: str) -> None:
    with server(tmp_path, kind, "--client-timeout", "1.5") as srv:
        silent = _closed_within(srv.port, lambda s: None, 6)
        assert b"408" in silent
        partial = _closed_within(srv.port, lambda s: s.sendall(b"GET / HTTP/1.1\r\nX: "), 6)
        assert b"408" in partial or partial in (b"<closed>", b"<reset>")
        _closed_within(srv.port, _trickle, 6)  # 70 bytes over 14 s would never end
        _closed_within(srv.port, _after_a_response, 8)


def test_connection_cap_evicts_idle_connections_first(tmp_path: Path) -> None:
    """At the cap, a newcomer closes the oldest idle connection, not a request in flight."""
    with server(tmp_path, "serve", "--max-connections", "8", "--client-timeout", "30") as srv:
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=60)
        sid = http.post("/v1/sessions", json={}).json()["id"]
        result: dict[str, Any] = {}

        def slow() -> None:
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as c:
                result["r"] = c.post(
                    f"/v1/sessions/{sid}/execute", json={"code": "import time; time.sleep(4)"}
                )

        worker = threading.Thread(target=slow)
        worker.start()
        time.sleep(1.0)
        with idle_connections(srv.port, count=40, budget_s=30):
            assert http.get("/healthz").status_code == 200
        worker.join(60)
        assert result["r"].status_code == 200, result["r"].text  # never evicted
        http.close()


# ------------------------------------------------------ rows 21, 22, 24: uploads
def _raw_put(
    port: int, path: str, head_extra: str = "", length: int | None = None
) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    s.sendall(
        f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"{framing}\r\n{head_extra}\r\n".encode()
    )
    return s


def _status(s: socket.socket, limit: float = 20) -> int:
    s.settimeout(limit)
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split()[1]) if data.startswith(b"HTTP/1.1") else 0


def test_stalled_uploads_time_out_and_free_the_session(tmp_path: Path) -> None:
    with server(tmp_path, "serve", "--client-timeout", "1.5") as srv:
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=30)
        sid = http.post("/v1/sessions", json={}).json()["id"]
        # (a) declared 1 MB, 3 KB sent; (b) chunked, stopped in the middle of a chunk
        stalls = []
        a = _raw_put(srv.port, f"/v1/sessions/{sid}/files/a.bin", length=1_000_000)
        a.sendall(b"x" * 3000)
        stalls.append(a)
        b = _raw_put(srv.port, f"/v1/sessions/{sid}/files/b.bin")
        b.sendall(b"1000\r\n" + b"y" * 100)
        stalls.append(b)
        for s in stalls:
            status, took = timed(lambda s=s: _status(s))
            assert status == 408 and took < 10
            s.close()
        put, took = timed(lambda: http.put(f"/v1/sessions/{sid}/files/c.txt", content=b"ok"))
        assert put.status_code == 201 and took < 5  # the session's upload lock was given back
        names = {f["path"] for f in http.get(f"/v1/sessions/{sid}/files").json()["files"]}
        assert names == {"c.txt"}
        http.close()


def test_a_client_gone_mid_upload_logs_one_line_at_most(tmp_path: Path) -> None:
    with server(tmp_path, "serve") as srv:
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=30)
        sid = http.post("/v1/sessions", json={}).json()["id"]
        for i in range(3):
            s = _raw_put(srv.port, f"/v1/sessions/{sid}/files/gone{i}.bin", length=100_000)
            s.sendall(b"z" * 5000)
            s.close()
            s = _raw_put(srv.port, f"/v1/sessions/{sid}/files/chunk{i}.bin")
            s.sendall(b"2000\r\n" + b"z" * 700)
            s.close()
        time.sleep(1.0)
        put = http.put(f"/v1/sessions/{sid}/files/next.txt", content=b"fine")
        assert put.status_code == 201
        assert [f["path"] for f in http.get(f"/v1/sessions/{sid}/files").json()["files"]] == [
            "next.txt"
        ]
        http.close()
    log = srv.log_text
    assert "Traceback" not in log and "ClientDisconnect" not in log, log[-3000:]
    assert len(log.splitlines()) < 10, log


def _slow_upload(port: int, path: str, total: int, piece: int, pause: float) -> int:
    s = _raw_put(port, path, length=total)
    sent = 0
    while sent < total:
        s.sendall(b"u" * piece)
        sent += piece
        time.sleep(pause)
    status = _status(s)
    s.close()
    return status


def _slow_chunked(port: int, path: str, total: int, piece: int, pause: float) -> int:
    s = _raw_put(port, path)
    for _ in range(total // piece):
        s.sendall(f"{piece:x}\r\n".encode() + b"c" * piece + b"\r\n")
        time.sleep(pause)
    s.sendall(b"0\r\n\r\n")
    status = _status(s)
    s.close()
    return status


@pytest.mark.parametrize("upload", [_slow_upload, _slow_chunked])
def test_an_upload_keeps_its_session_alive_past_its_ttl(tmp_path: Path, upload: Any) -> None:
    with server(tmp_path, "serve") as srv:
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=30)
        sid = http.post("/v1/sessions", json={"ttl": 1.5}).json()["id"]
        status = upload(srv.port, f"/v1/sessions/{sid}/files/slow.bin", 30_000, 1000, 0.2)
        assert status == 201  # 6 s of upload, four times the TTL
        info = http.get(f"/v1/sessions/{sid}").json()
        assert info["status"] == "live", info
        files = http.get(f"/v1/sessions/{sid}/files").json()["files"]
        assert [(f["path"], f["size"]) for f in files] == [("slow.bin", 30_000)]
        time.sleep(3.0)  # idle now: it ends, and keeps the file
        info = http.get(f"/v1/sessions/{sid}").json()
        assert info["status"] == "expired", info
        kept = http.get(f"/v1/sessions/{sid}/files").json()["files"]
        assert [f["path"] for f in kept] == ["slow.bin"]
        http.close()


def test_delete_during_an_upload_answers_it(tmp_path: Path) -> None:
    with server(tmp_path, "serve") as srv:
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=30)
        sid = http.post("/v1/sessions", json={}).json()["id"]
        s = _raw_put(srv.port, f"/v1/sessions/{sid}/files/x.bin", length=50_000)
        s.sendall(b"d" * 2000)
        time.sleep(0.5)
        assert http.delete(f"/v1/sessions/{sid}").status_code == 204
        assert _status(s) == 410
        s.close()
        http.close()


# ------------------------------------------------------ row 26: short session TTLs
@pytest.mark.parametrize("ttl", [1.0, 2.5])
def test_a_short_session_ttl_ends_on_time(tmp_path: Path, ttl: float) -> None:
    with server(tmp_path, "serve") as srv:  # the server's TTL: 2 h, culled every 30 s
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=30)
        sid = http.post("/v1/sessions", json={"ttl": ttl}).json()["id"]
        start = time.monotonic()
        while http.get(f"/v1/sessions/{sid}").json()["status"] == "live":
            assert time.monotonic() - start < ttl + 3, "still live"
            time.sleep(0.1)
        assert time.monotonic() - start >= ttl - 0.2
        http.close()


# ------------------------------------------------------ row 52: client errors
def test_client_errors_are_4xx_in_the_apis_shape(tmp_path: Path) -> None:
    with server(tmp_path, "serve") as srv:
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=60)
        for kernel in ("nosuch", "python3\u0000x", "../../bin/sh"):
            r = http.post("/v1/sessions", json={"kernel": kernel})
            assert r.status_code in (400, 404) and set(r.json()) == {"error"}, r.text
        for method, path in [("GET", "/nope"), ("GET", "/v1/nope"), ("POST", "/v1/x/y/z"),
                             ("PATCH", "/v1/sessions"), ("PUT", "/healthz")]:  # fmt: skip
            r = http.request(method, path)
            assert r.status_code in (404, 405) and set(r.json()) == {"error"}, (path, r.text)
        http.close()
    assert "Traceback" not in srv.log_text


# ------------------------------------------------------ row 45: MCP sessions
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "flood", "version": "1"}}}  # fmt: skip
MCP_HEADERS = {**AUTH, "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}  # fmt: skip


def test_mcp_sessions_are_capped_and_options_opens_none(tmp_path: Path) -> None:
    from kernel_agent.frontends.mcp_sessions import MCP_SESSIONS

    with server(tmp_path, "mcp") as srv:
        url = srv.url + "/mcp"
        http = httpx.Client(timeout=30)
        for method in ("OPTIONS", "GET", "DELETE", "PATCH"):
            for _ in range(20):
                r = http.request(method, url, headers=MCP_HEADERS)
                assert r.status_code in (400, 405) and set(r.json()) == {"error"}, r.text
        for path in ("/", "/mcp/x", "/.well-known/oauth-authorization-server"):
            r = http.post(srv.url + path, json=INIT, headers=MCP_HEADERS)
            assert r.status_code == 404 and set(r.json()) == {"error"}, r.text
        ids = []
        for _ in range(3 * MCP_SESSIONS):  # one token holder opening sessions and leaving them
            r = http.post(url, json=INIT, headers=MCP_HEADERS)
            assert r.status_code == 200, r.text
            ids.append(r.headers["mcp-session-id"])
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        alive = [
            sid for sid in ids
            if http.post(url, json=ping, headers={**MCP_HEADERS, "mcp-session-id": sid,
                                                  "mcp-protocol-version": "2025-06-18"}
                         ).status_code == 200
        ]  # fmt: skip
        assert len(alive) <= MCP_SESSIONS and ids[-1] in alive and ids[0] not in alive
        http.close()


# ------------------------------------------------------ row 42: event streams
def _follower(port: int, path: str) -> socket.socket:
    """An event stream that never reads (a 4 KB receive buffer)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
              .encode())  # fmt: skip
    return s


def _drain(s: socket.socket, limit: float = 20) -> tuple[int, bool]:
    """(bytes read, whether the server closed the stream) reading for at most ``limit`` s."""
    s.settimeout(1)
    got, start = 0, time.monotonic()
    while time.monotonic() - start < limit:
        try:
            chunk = s.recv(1 << 16)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return got, True
        if not chunk:
            return got, True
        got += len(chunk)
    return got, False


def test_event_streams_are_capped_and_unread_ones_dropped(tmp_path: Path) -> None:
    from fake_openai import FakeLLM, run_cell, text

    from kernel_agent.service.app import FOLLOWERS_PER_RUN

    with FakeLLM() as llm, server(tmp_path, "serve", "--client-timeout", "2", "--model",
                                  "gpt-fake", "--base-url", llm.base_url, "--protocol",
                                  "tools") as srv:  # fmt: skip
        http = httpx.Client(base_url=srv.url, headers=AUTH, timeout=120)
        sid = http.post("/v1/sessions", json={}).json()["id"]
        llm.enqueue(run_cell("print('x' * 4_000_000)"), text("printed"))
        r = http.post(f"/v1/sessions/{sid}/runs", json={"task": "print a lot"},
                      headers={"Accept": "application/json"})  # fmt: skip
        run = r.json()["id"]
        path = f"/v1/sessions/{sid}/runs/{run}/events"
        while http.get(f"/v1/sessions/{sid}/runs/{run}").json()["status"] == "running":
            time.sleep(0.2)
        whole = len(http.get(path).content)
        assert whole > 1_000_000  # the stream is big enough to matter
        before = srv.rss_kb()
        stalled = [_follower(srv.port, path) for _ in range(FOLLOWERS_PER_RUN)]
        time.sleep(1.0)
        grown_mb = (srv.rss_kb() - before) / 1024
        # one more follower of this run: 429 in the API's shape (the cap per run)
        extra = http.get(path)
        assert extra.status_code == 429 and "error" in extra.json()
        # each unread stream holds about a piece, not the whole run (old: ~1x the run each)
        assert grown_mb < FOLLOWERS_PER_RUN * whole / 1e6 / 3, (grown_mb, whole)
        # and is dropped once it has read nothing for --client-timeout
        time.sleep(4.0)
        for s in stalled:
            got, closed = _drain(s)
            assert closed and got < whole, (got, whole)
            s.close()
        # their places are free again
        assert len(http.get(path).content) == whole
        http.close()


def test_a_stalled_request_body_is_answered_408_on_mcp(tmp_path: Path) -> None:
    """The body timeout is the runner's, not serve's: MCP's JSON-RPC bodies too."""
    with server(tmp_path, "mcp", "--client-timeout", "1.5") as srv:
        for framing in ("Content-Length: 5000", "Transfer-Encoding: chunked"):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            s.sendall(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream"
                f"\r\n{framing}\r\n\r\n".encode()
                + (b'{"jsonrpc": "2.0", ' if "Length" in framing else b'400\r\n{"jsonrpc"')
            )
            status, took = timed(lambda s=s: _status(s))
            assert status == 408 and took < 10, status
            s.close()
    assert "Traceback" not in srv.log_text


def test_event_streams_are_capped_per_client_across_runs() -> None:
    """The cap per client address holds over many runs (each under its own cap)."""
    from kernel_agent.errors import TooBusy
    from kernel_agent.service.app import FOLLOWERS_PER_CLIENT, FOLLOWERS_PER_RUN, _Followers
    from kernel_agent.service.runs import HostedRun

    followers = _Followers()
    runs = [HostedRun(f"task {i}") for i in range(FOLLOWERS_PER_CLIENT)]
    for i in range(FOLLOWERS_PER_CLIENT):
        followers.take(runs[i % len(runs)], "10.0.0.1")
    with pytest.raises(TooBusy):
        followers.take(runs[-1], "10.0.0.1")  # a fresh run, the same client
    followers.take(runs[-1], "10.0.0.2")  # another client is not held back
    for _ in range(FOLLOWERS_PER_RUN - 2):
        followers.take(runs[-1], "10.0.0.3")
    with pytest.raises(TooBusy):
        followers.take(runs[-1], "10.0.0.4")  # that run is full, whoever asks
    followers.give_back(runs[0], "10.0.0.1")
    followers.take(runs[1], "10.0.0.1")  # a place given back is a place again
