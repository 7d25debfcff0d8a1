"""The HTTP API: each route maps one request to one :class:`SessionManager` call.

Auth: every route but ``/healthz`` and ``/login`` needs the bearer token, sent as
``Authorization: Bearer T``, or (for the web page) the cookie the login sets (a value
derived from the token and a secret made at start, never the token itself).
Tokens are compared in constant time. Errors are JSON ``{"error": "..."}``.

Before auth, every request passes :class:`~kernel_agent.edges.webguard.HostGuard` (Host and
Origin: DNS rebinding, cross-origin pages) and a cap on JSON bodies (413). Whatever a
kernel wrote (rendered notebooks, files) is served with a sandboxing CSP.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..edges.webguard import DOWNLOAD_HEADERS, NOTEBOOK_CSP, HostGuard, is_loopback_host
from ..errors import (
    ConfigError,
    KernelAgentError,
    KernelNotFound,
    ServiceError,
    TooBusy,
    UnsafePath,
)
from ..version import __version__
from .manager import ServiceConfig, SessionManager
from .runs import HostedRun, cell_json, sse
from .web import COOKIE

__all__ = [
    "create_app",
    "COOKIE",
    "MAX_TIMEOUT_S",
    "MAX_TTL_S",
    "FOLLOWERS_PER_RUN",
    "FOLLOWERS_PER_CLIENT",
]

_OPEN_PATHS = ("/healthz", "/login")
#: the longest a request may ask a cell to run, and a session to idle (finite, bounded)
MAX_TIMEOUT_S = 24 * 3600.0
MAX_TTL_S = 30 * 24 * 3600.0
#: event streams at most of one run, and of one client address (over all runs)
FOLLOWERS_PER_RUN = 8
FOLLOWERS_PER_CLIENT = 32
_PIECE = 64 * 1024


class SessionCreate(BaseModel):
    kernel: str | None = Field(
        None, max_length=200, description="Jupyter kernelspec name (default: the server's)"
    )
    ttl: float | None = Field(
        None, gt=0, le=MAX_TTL_S, allow_inf_nan=False,
        description="seconds of inactivity before the session is culled",
    )  # fmt: skip
    model: str | None = Field(
        None, max_length=300, description="model for agent runs in this session"
    )
    temperature: float | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    max_steps: int | None = Field(None, ge=1, le=1000)
    cell_timeout: float | None = Field(
        None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False,
        description="default seconds before a cell is interrupted",
    )  # fmt: skip


class ExecuteRequest(BaseModel):
    code: str = Field(..., min_length=1)
    timeout: float | None = Field(None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)


class RunRequest(BaseModel):
    task: str = Field(..., min_length=1)


def cookie_value(token: str, secret: bytes) -> str:
    """The login cookie: an HMAC of the token under a secret made when the app starts, so
    the cookie (sent to every port of this host) never carries the token and dies with
    the server."""
    return hmac.new(secret, token.encode(), hashlib.sha256).hexdigest()


def _authorized(request: Request, token: str | None, cookie: str) -> bool:
    if token is None:
        return True
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return hmac.compare_digest(header[7:].encode(), token.encode())
    given = request.cookies.get(COOKIE, "")
    return hmac.compare_digest(given.encode(), cookie.encode())


class BodyLimit:
    """ASGI middleware: request bodies over ``limit`` bytes get 413, except file uploads
    (``PUT .../files/...``, limited by the manager as they stream)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (
            scope["method"] == "PUT" and "/files/" in scope.get("path", "")
        ):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._too_large(send)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await self._too_large(send)
                return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # then the disconnect, when it comes

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any) -> None:
        data = json.dumps({"error": f"the request body is over {self.limit} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})


async def _gone(request: Request) -> None:
    """Return when the client of ``request`` disconnects (its body already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def create_app(config: ServiceConfig, manager: SessionManager | None = None) -> FastAPI:
    """The ASGI app; its lifespan starts the manager and finalises every session on the way out."""
    manager = manager or SessionManager(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await manager.start()
        try:
            yield
        finally:
            await manager.shutdown()

    app = FastAPI(
        title="kernel-agent",
        version=__version__,
        description="Persistent, sandboxed Jupyter sessions: run code or agent tasks, move files, "
        "download the notebook.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.manager = manager
    app.state.config = config
    cookie = cookie_value(config.token or "", secrets.token_bytes(32))
    app.state.cookie = cookie
    app.state.followers = _Followers()

    @app.middleware("http")
    async def auth(request: Request, call_next: Any) -> Response:
        path = request.url.path
        if path in _OPEN_PATHS or _authorized(request, config.token, cookie):
            return await call_next(request)
        given = request.query_params.get("token")
        if (
            given is not None
            and config.token
            and request.method == "GET"
            and hmac.compare_digest(given.encode(), config.token.encode())
        ):
            from .web import login_redirect

            return login_redirect(request, cookie)
        if not path.startswith("/v1/") and path != "/openapi.json" and request.method == "GET":
            from .web import login_page

            return login_page(status=401)
        return JSONResponse(
            {"error": "a valid bearer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )

    # outermost first: Host/Origin, then the body cap, then auth and the routes
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    app.add_middleware(
        HostGuard,
        loopback_only=is_loopback_host(config.host),
        names=config.allowed_hosts,
        same_origin=True,
    )

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, TooBusy) else None
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=headers)

    @app.exception_handler(KernelAgentError)
    async def agent_error(request: Request, exc: KernelAgentError) -> JSONResponse:
        client = isinstance(exc, (ConfigError, UnsafePath, KernelNotFound))
        return JSONResponse({"error": str(exc)}, status_code=400 if client else 500)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and methods: 404/405 in the API's shape."""
        return JSONResponse({"error": str(exc.detail)}, exc.status_code, exc.headers)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> Response:
        return Response(status_code=499)  # nobody reads it; no traceback in the log

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422 ``{"error": ...}``: where and what, never the value sent (it may be NaN)."""
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg")))
        return JSONResponse({"error": "; ".join(parts) or "invalid request"}, status_code=422)

    @app.exception_handler(ValueError)
    async def value_error(request: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "version": __version__, "pool_ready": manager.pool.ready}

    # -------------------------------------------------------------------- sessions
    @app.post("/v1/sessions", status_code=201)
    async def create_session(body: SessionCreate) -> dict[str, Any]:
        """Start a session: a kernel (from the warm pool when one fits), a work dir, a notebook."""
        overrides = body.model_dump(exclude={"kernel", "ttl"}, exclude_none=True)
        hosted = await manager.create(kernel=body.kernel, ttl=body.ttl, **overrides)
        return hosted.info()

    @app.get("/v1/sessions")
    async def list_sessions() -> dict[str, Any]:
        return {"sessions": [h.info() for h in manager.sessions.values()]}

    @app.get("/v1/sessions/{sid}")
    async def get_session(sid: str) -> dict[str, Any]:
        return manager.get(sid).info()

    @app.delete("/v1/sessions/{sid}", status_code=204)
    async def delete_session(sid: str) -> Response:
        """Stop the kernel and remove its work dir (download files first)."""
        await manager.delete(sid)
        return Response(status_code=204)

    # ----------------------------------------------------------------------- files
    @app.get("/v1/sessions/{sid}/files")
    async def list_files(sid: str) -> dict[str, Any]:
        return {"files": await manager.list_files(sid)}

    @app.put("/v1/sessions/{sid}/files/{path:path}", status_code=201)
    async def put_file(sid: str, path: str, request: Request) -> dict[str, Any]:
        """Upload the raw request body to ``path`` in the session's work dir."""
        declared = request.headers.get("content-length")
        size = await manager.upload(
            sid, path, request.stream(), int(declared) if declared else None
        )
        return {"path": path, "size": size}

    @app.get("/v1/sessions/{sid}/files/{path:path}")
    async def get_file(sid: str, path: str) -> StreamingResponse:
        fd, size = await manager.open_file(sid, path)

        def chunks() -> Iterator[bytes]:
            with os.fdopen(fd, "rb") as fh:
                while block := fh.read(256 * 1024):
                    yield block

        return StreamingResponse(
            chunks(),
            media_type="application/octet-stream",
            headers={
                "Content-Length": str(size),
                "Content-Disposition": "attachment",
                **DOWNLOAD_HEADERS,
            },
        )

    @app.delete("/v1/sessions/{sid}/files/{path:path}", status_code=204)
    async def delete_file(sid: str, path: str) -> Response:
        await manager.delete_file(sid, path)
        return Response(status_code=204)

    # --------------------------------------------------------------------- execute
    @app.post("/v1/sessions/{sid}/execute")
    async def execute(sid: str, body: ExecuteRequest, request: Request) -> Response:
        """Run one cell; the answer holds its nbformat outputs. Recorded in the notebook.

        A client that disconnects gives up its cell: it is interrupted (and recorded when it
        stops), and its slot is freed. DELETE of the session answers it with 410."""
        work = asyncio.ensure_future(manager.execute(sid, body.code, body.timeout))
        gone = asyncio.ensure_future(_gone(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            gone.cancel()
        if not work.done():  # the client went away: nobody reads this answer
            work.cancel()
            await asyncio.wait({work})
            return Response(status_code=499)
        run = work.result()
        return JSONResponse({**cell_json(run.result), "cell": run.index})

    # ------------------------------------------------------------------------ runs
    @app.post("/v1/sessions/{sid}/runs")
    async def start_run(sid: str, body: RunRequest, request: Request) -> Response:
        """Start an agent run. SSE of its typed events then ``event: result``; with
        ``Accept: application/json``, the run's id at once instead."""
        run = await manager.start_run(sid, body.task)
        if "text/event-stream" not in request.headers.get(
            "accept", "text/event-stream"
        ) and "application/json" in request.headers.get("accept", ""):
            return JSONResponse(run.info(), status_code=202)
        return _stream(run, 0, request)

    @app.get("/v1/sessions/{sid}/runs/{run_id}")
    async def get_run(sid: str, run_id: str) -> dict[str, Any]:
        return manager.run(sid, run_id).info()

    @app.get("/v1/sessions/{sid}/runs/{run_id}/events")
    async def follow_run(
        sid: str, run_id: str, request: Request, start: int = 0
    ) -> StreamingResponse:
        """The run's events as SSE from event ``start`` on, live until it ends."""
        return _stream(manager.run(sid, run_id), max(0, start), request)

    # -------------------------------------------------------------------- notebook
    @app.get("/v1/sessions/{sid}/notebook")
    async def notebook(sid: str, format: str = "ipynb", clean: bool = False) -> Response:
        """The transcript (or with ``clean=true`` the clean notebook) as ipynb or html."""
        from .views import notebook_file

        path, media = await notebook_file(manager, sid, format, clean)
        name = path.name
        return Response(
            path.read_bytes(),
            media_type=media,
            headers={
                "Content-Disposition": f'attachment; filename="{name}"',
                **DOWNLOAD_HEADERS,
                "Content-Security-Policy": NOTEBOOK_CSP,
            },
        )

    from .web import add_pages

    add_pages(app, manager)
    return app


class _Followers:
    """Who follows which run's events: at most :data:`FOLLOWERS_PER_RUN` streams of one
    run and :data:`FOLLOWERS_PER_CLIENT` of one client address, else 429. Each stream
    sends a run's shared frames in pieces of :data:`_PIECE` bytes, so the server's flow
    control holds about one piece per stream; one that stops reading is dropped by the
    server's reader timeout (``frontends/httpd.py``)."""

    def __init__(self) -> None:
        self.by_client: Counter[str] = Counter()

    def take(self, run: HostedRun, client: str) -> None:
        if run.followers >= FOLLOWERS_PER_RUN:
            raise TooBusy(f"{run.followers} streams follow this run already", retry_after=5)
        if self.by_client[client] >= FOLLOWERS_PER_CLIENT:
            raise TooBusy(f"{FOLLOWERS_PER_CLIENT} event streams are open from here", 5)
        run.followers += 1
        self.by_client[client] += 1

    def give_back(self, run: HostedRun, client: str) -> None:
        run.followers -= 1
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]


class _EventStream(StreamingResponse):
    def __init__(self, body: AsyncIterator[bytes], release: Any, **kw: Any) -> None:
        super().__init__(body, **kw)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _stream(run: HostedRun, start: int, request: Request) -> StreamingResponse:
    followers: _Followers = request.app.state.followers
    client = request.client.host if request.client else ""
    followers.take(run, client)

    async def frames() -> AsyncIterator[bytes]:
        yield sse("run", json.dumps({"id": run.id, "task": run.task}))
        async for frame in run.follow(start):
            for at in range(0, len(frame), _PIECE):
                yield frame[at : at + _PIECE]
        yield sse("result", json.dumps(run.info()))

    return _EventStream(
        frames(),
        lambda: followers.give_back(run, client),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Run-Id": run.id},
    )
