"""The HTTP API: each route maps one request to one :class:`SessionManager` call.

Auth: every route but ``/healthz`` and ``/login`` needs the bearer token, sent as
``Authorization: Bearer T``, or (for the web page) the cookie the login sets.
Tokens are compared in constant time. Errors are JSON ``{"error": "..."}``.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from .. import __version__
from ..errors import ConfigError, KernelAgentError
from ..safefs import UnsafePath
from .limits import ServiceError, TooBusy
from .manager import ServiceConfig, SessionManager
from .runs import cell_json, sse

__all__ = ["create_app", "COOKIE"]

COOKIE = "kernel_agent_token"
_OPEN_PATHS = ("/healthz", "/login")


class SessionCreate(BaseModel):
    kernel: str | None = Field(None, description="Jupyter kernelspec name (default: the server's)")
    ttl: float | None = Field(
        None, gt=0, description="seconds of inactivity before the session is culled"
    )
    model: str | None = Field(None, description="model for agent runs in this session")
    temperature: float | None = None
    max_steps: int | None = Field(None, ge=1)
    cell_timeout: float | None = Field(
        None, gt=0, description="default seconds before a cell is interrupted"
    )


class ExecuteRequest(BaseModel):
    code: str = Field(..., min_length=1)
    timeout: float | None = Field(None, gt=0)


class RunRequest(BaseModel):
    task: str = Field(..., min_length=1)


def _authorized(request: Request, token: str | None) -> bool:
    if token is None:
        return True
    expected = token.encode()
    header = request.headers.get("authorization", "")
    given = header[7:] if header[:7].lower() == "bearer " else request.cookies.get(COOKIE, "")
    return hmac.compare_digest(given.encode(), expected)


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

    @app.middleware("http")
    async def auth(request: Request, call_next: Any) -> Response:
        path = request.url.path
        if path in _OPEN_PATHS or _authorized(request, config.token):
            return await call_next(request)
        given = request.query_params.get("token")
        if (
            given is not None
            and config.token
            and hmac.compare_digest(given.encode(), config.token.encode())
        ):
            from .web import login_redirect

            return login_redirect(request, given)
        if not path.startswith("/v1/") and path != "/openapi.json" and request.method == "GET":
            from .web import login_page

            return login_page(status=401)
        return JSONResponse(
            {"error": "a valid bearer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, TooBusy) else None
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=headers)

    @app.exception_handler(KernelAgentError)
    async def agent_error(request: Request, exc: KernelAgentError) -> JSONResponse:
        status = 400 if isinstance(exc, (ConfigError, UnsafePath)) else 500
        return JSONResponse({"error": str(exc)}, status_code=status)

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
        return {"files": manager.list_files(sid)}

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
        fd, size = manager.open_file(sid, path)

        def chunks() -> Iterator[bytes]:
            with os.fdopen(fd, "rb") as fh:
                while block := fh.read(256 * 1024):
                    yield block

        return StreamingResponse(
            chunks(), media_type="application/octet-stream", headers={"Content-Length": str(size)}
        )

    @app.delete("/v1/sessions/{sid}/files/{path:path}", status_code=204)
    async def delete_file(sid: str, path: str) -> Response:
        manager.delete_file(sid, path)
        return Response(status_code=204)

    # --------------------------------------------------------------------- execute
    @app.post("/v1/sessions/{sid}/execute")
    async def execute(sid: str, body: ExecuteRequest) -> dict[str, Any]:
        """Run one cell; the answer holds its nbformat outputs. Recorded in the notebook."""
        run = await manager.execute(sid, body.code, body.timeout)
        return {**cell_json(run.result), "cell": run.index}

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
        return _stream(run, 0)

    @app.get("/v1/sessions/{sid}/runs/{run_id}")
    async def get_run(sid: str, run_id: str) -> dict[str, Any]:
        return manager.run(sid, run_id).info()

    @app.get("/v1/sessions/{sid}/runs/{run_id}/events")
    async def follow_run(sid: str, run_id: str, start: int = 0) -> StreamingResponse:
        """The run's events as SSE from event ``start`` on, live until it ends."""
        return _stream(manager.run(sid, run_id), max(0, start))

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
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    from .web import add_pages

    add_pages(app, manager)
    return app


def _stream(run: Any, start: int) -> StreamingResponse:
    async def frames() -> AsyncIterator[bytes]:
        yield sse("run", json.dumps({"id": run.id, "task": run.task}))
        async for item in run.follow(start):
            yield sse("event", json.dumps(item))
        yield sse("result", json.dumps(run.info()))

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Run-Id": run.id},
    )
