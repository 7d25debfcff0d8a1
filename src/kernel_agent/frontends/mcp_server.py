"""The MCP front end: tools and a resource over one :class:`~kernel_agent.session.Session`.

Each tool is a JSON schema, a description, and a call on the session; nothing here
touches a kernel. Failures come back as MCP tool errors (``isError``) whose text is
one sentence. While a cell runs, a progress notification goes out every
``heartbeat_s`` seconds (when the client asked for progress), so clients with a
request timeout that resets on progress do not give up on long cells. An HTTP client
that drops its stream without cancelling is noticed at the next heartbeat: its cell
is interrupted (and recorded), so the next caller does not wait for it.

Transports: :func:`serve_stdio` and :func:`serve_http` (streamable HTTP, bearer token,
Host and Origin checked for any bind address; SIGTERM interrupts a running cell).
Built on the official ``mcp`` SDK's low-level server.
"""

from __future__ import annotations

import asyncio
import hmac
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from ..errors import KernelAgentError
from ..session import Session
from ..version import __version__

__all__ = [
    "TOOLS",
    "build_server",
    "serve_stdio",
    "serve_http",
    "BearerAuth",
    "NOTEBOOK_URI",
    "CLEAN_URI",
]

NOTEBOOK_URI = "kernel-agent://notebook"
CLEAN_URI = "kernel-agent://notebook/clean"
_IPYNB = "application/x-ipynb+json"

INSTRUCTIONS = (
    "A persistent, sandboxed Jupyter kernel that records every cell in a notebook. Run code with "
    "run_cell: state (variables, imports) persists between calls. Files are read and written in "
    "the kernel's work dir. Finish with verify_notebook to check that the clean notebook "
    "reproduces in a fresh kernel."
)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool = False
    destructive: bool = False


def _obj(
    properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties or {},
        "required": list(required),
        "additionalProperties": False,
    }


_PATH = {
    "type": "string",
    "minLength": 1,
    "description": "a path relative to the work dir ('data/x.csv'); no '..', no absolute paths",
}

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "run_cell",
        "Run code in the persistent kernel (variables and imports survive between calls) and "
        "return what it printed: text within a budget, errors with a clean traceback, images as "
        "image content (downscaled), and which variables the cell created or changed. The cell and "
        "its full outputs are recorded in the notebook. A cell past its timeout is interrupted; if "
        "that fails the kernel is restarted and its state rebuilt by replaying earlier cells.",
        _obj(
            {
                "code": {"type": "string", "minLength": 1, "description": "the code of one cell"},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "seconds before the cell is interrupted "
                    "(default: the server's --cell-timeout)",
                },
            },
            ("code",),
        ),
        destructive=True,
    ),
    ToolSpec(
        "list_variables",
        "List the kernel's variables: name, type, shape or length, DataFrame columns, "
        "and short values.",
        _obj(),
        read_only=True,
    ),
    ToolSpec(
        "read_notebook",
        "The cells run so far, as text: each cell's index, execution count, status, source and an "
        "output summary. With clean=true, only the cells that built the current state, renumbered "
        "as a fresh run (what verify_notebook checks).",
        _obj(
            {
                "clean": {
                    "type": "boolean",
                    "default": False,
                    "description": "show the clean notebook",
                }
            }
        ),
        read_only=True,
    ),
    ToolSpec(
        "read_cell",
        "One notebook cell in full (source and outputs), by the index read_notebook shows; "
        "negative indexes count from the end.",
        _obj(
            {"index": {"type": "integer", "description": "the cell's index in the notebook"}},
            ("index",),
        ),
        read_only=True,
    ),
    ToolSpec(
        "restart_kernel",
        "Restart the kernel. With rebuild=true (the default) the cells that built the state are "
        "replayed; the reply says which variables survived.",
        _obj(
            {
                "rebuild": {
                    "type": "boolean",
                    "default": True,
                    "description": "replay earlier successful cells",
                }
            }
        ),
        destructive=True,
    ),
    ToolSpec(
        "interrupt_kernel",
        "Interrupt the cell that is running now (like Ctrl-C); the kernel keeps its state.",
        _obj(),
    ),
    ToolSpec(
        "verify_notebook",
        "Write the clean notebook (only the cells that built the current state) and re-run it top "
        "to bottom in a fresh kernel; returns the verdict (reproduced, differs or error) and the "
        "clean notebook's path.",
        _obj(),
    ),
    ToolSpec(
        "export_notebook",
        "Export the clean notebook (or, with clean=false, the full transcript) to HTML or Markdown "
        "beside it; returns the path of the file written.",
        _obj(
            {
                "to": {
                    "type": "string",
                    "enum": ["html", "markdown"],
                    "default": "html",
                    "description": "the format",
                },
                "clean": {
                    "type": "boolean",
                    "default": True,
                    "description": "export the clean notebook",
                },
            }
        ),
    ),
    ToolSpec(
        "list_files",
        "List the files in the kernel's work dir (recursively, a few levels deep; symlinks are "
        "listed as links and not followed).",
        _obj(),
        read_only=True,
    ),
    ToolSpec(
        "read_file",
        "Read a UTF-8 text file (at most 256 KB) from the kernel's work dir.",
        _obj({"path": _PATH}, ("path",)),
        read_only=True,
    ),
    ToolSpec(
        "write_file",
        "Write a UTF-8 text file into the kernel's work dir (atomically, replacing it; parent "
        "directories are created).",
        _obj(
            {"path": _PATH, "content": {"type": "string", "description": "the whole file"}},
            ("path", "content"),
        ),
        destructive=True,
    ),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}


def _text(text: str, structured: Any = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured, is_error=error
    )


def _one_sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _client(ctx: Any) -> dict[str, Any]:
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is None:
        return {"name": "unknown"}
    return {"name": info.name, "version": info.version}


async def _client_gone(ctx: Any) -> bool:
    """Whether the HTTP client of this request has disconnected (False over stdio)."""
    request = getattr(ctx, "request", None)
    check = getattr(request, "is_disconnected", None)
    if check is None:
        return False
    try:
        return bool(await check())
    except Exception:  # noqa: BLE001 - no answer is "still there"
        return False


class _Tools:
    """The tool handlers: each maps arguments to one session call."""

    def __init__(self, session: Session, heartbeat_s: float, transport: str) -> None:
        self.session = session
        self.heartbeat_s = heartbeat_s
        self.transport = transport

    def provenance(self, ctx: Any, tool: str) -> dict[str, Any]:
        client = _client(ctx)
        self.session.add_client({**client, "transport": self.transport})
        return {"source": "mcp", "client": client, "tool": tool}

    async def run_cell(
        self, ctx: Any, code: str, timeout: float | None = None
    ) -> types.CallToolResult:
        outputs = 0

        def count(_: Any) -> None:
            nonlocal outputs
            outputs += 1

        began = time.monotonic()
        work = asyncio.ensure_future(
            self.session.run_cell(
                code, timeout, provenance=self.provenance(ctx, "run_cell"), on_output=count
            )
        )
        try:
            while True:
                done, _ = await asyncio.wait({work}, timeout=self.heartbeat_s)
                if done:
                    break
                if await _client_gone(ctx):  # dropped its stream without cancelling
                    work.cancel()
                    return _text("The client went away; the cell was interrupted.", error=True)
                elapsed = time.monotonic() - began
                await ctx.session.report_progress(
                    round(elapsed, 1),
                    None,
                    f"cell running for {elapsed:.0f} s, {outputs} outputs so far",
                )
        except BaseException:
            work.cancel()
            raise
        run = work.result()
        content: list[Any] = [types.TextContent(text=run.text)]
        content += [types.ImageContent(data=img.data, mime_type=img.mime) for img in run.images]
        result = run.result
        structured = {
            "status": result.status,
            "execution_count": result.execution_count,
            "cell": run.index,
            "seconds": round(result.duration, 3),
            "restarted": result.restarted,
        }
        return types.CallToolResult(content=content, structured_content=structured, is_error=False)

    async def list_variables(self, ctx: Any) -> types.CallToolResult:
        summary = await self.session.variables()
        if not summary:
            return _text("The kernel has no variables yet.", {"variables": []})
        lines = [info.short() for info in summary.values()]
        rows = [
            {k: v for k, v in vars(info).items() if v is not None and k != "id"}
            for info in summary.values()
        ]
        for row in rows:
            if "columns" in row:
                row["columns"] = list(row["columns"])
        return _text("\n".join(lines), {"variables": rows})

    async def read_notebook(self, ctx: Any, clean: bool = False) -> types.CallToolResult:
        return _text(self.session.notebook_text(clean=clean))

    async def read_cell(self, ctx: Any, index: int) -> types.CallToolResult:
        return _text(self.session.cell_text(index))

    async def restart_kernel(self, ctx: Any, rebuild: bool = True) -> types.CallToolResult:
        note = await self.session.restart(
            rebuild, provenance=self.provenance(ctx, "restart_kernel")
        )
        return _text(note)

    async def interrupt_kernel(self, ctx: Any) -> types.CallToolResult:
        await self.session.interrupt()
        return _text(
            "Interrupt sent; a running cell stops with KeyboardInterrupt "
            "and the kernel keeps its state."
        )

    async def verify_notebook(self, ctx: Any) -> types.CallToolResult:
        report = await self.session.verify()
        clean = report.path
        text = f"{report.summary()}\nclean notebook: {clean}"
        structured = {
            "verdict": report.verdict,
            "clean_notebook": str(clean),
            **report.to_metadata(),
        }
        return _text(text, structured)

    async def export_notebook(
        self, ctx: Any, to: str = "html", clean: bool = True
    ) -> types.CallToolResult:
        path = await self.session.export(to, clean=clean)
        return _text(str(path), {"path": str(path)})

    async def list_files(self, ctx: Any) -> types.CallToolResult:
        entries = await self.session.list_files()
        if not entries:
            return _text("The work dir is empty.", {"files": []})
        lines = [
            f"{e.path}{'/' if e.kind == 'dir' else ''}  {e.kind}  {e.size} bytes" for e in entries
        ]
        return _text("\n".join(lines), {"files": [vars(e) for e in entries]})

    async def read_file(self, ctx: Any, path: str) -> types.CallToolResult:
        return _text(await self.session.read_file(path))

    async def write_file(self, ctx: Any, path: str, content: str) -> types.CallToolResult:
        size = await self.session.write_file(path, content)
        return _text(f"wrote {size} bytes to {path}", {"path": path, "bytes": size})


def build_server(
    session: Session, *, heartbeat_s: float = 5.0, transport: str = "stdio"
) -> Server[Any]:
    """The MCP server over ``session`` (started by the caller)."""
    import jsonschema

    tools = _Tools(session, heartbeat_s, transport)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=t.read_only,
                        destructive_hint=t.destructive,
                        open_world_hint=False,
                    ),
                )
                for t in TOOLS
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = _BY_NAME.get(params.name)
        if spec is None:
            return _text(f"There is no tool named {params.name!r}.", error=True)
        args = dict(params.arguments or {})
        try:
            jsonschema.validate(args, spec.schema)
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path)
            return _text(
                f"Invalid arguments for {spec.name}: {where + ': ' if where else ''}{exc.message}.",
                error=True,
            )
        handler: Callable[..., Awaitable[types.CallToolResult]] = getattr(tools, spec.name)
        try:
            return await handler(ctx, **args)
        except KernelAgentError as exc:
            return _text(_one_sentence(exc), error=True)
        except (OSError, ValueError) as exc:
            return _text(f"{spec.name} failed: {_one_sentence(exc)}", error=True)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=NOTEBOOK_URI,
                    name="notebook",
                    description="The session's notebook (.ipynb): every cell run so far, "
                    "with full outputs.",
                    mime_type=_IPYNB,
                ),
                types.Resource(
                    uri=CLEAN_URI,
                    name="clean-notebook",
                    description="The clean notebook (.ipynb): only the cells that built "
                    "the current state.",
                    mime_type=_IPYNB,
                ),
            ]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == NOTEBOOK_URI:
            text = session.notebook_json()
        elif uri == CLEAN_URI:
            text = session.write_clean().read_text(encoding="utf-8")
        else:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=_IPYNB, text=text)]
        )

    return Server(
        "kernel-agent",
        version=__version__,
        # a notebook open in JupyterLab says what it is (its own kernel, unsandboxed)
        instructions=getattr(session.executor, "instructions", None) or INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def _say(text: str) -> None:
    print(f"kernel-agent mcp: {text}", file=sys.stderr, flush=True)


async def serve_stdio(session: Session, *, heartbeat_s: float = 5.0) -> None:
    """Serve over stdin/stdout until the client closes them.

    The SDK moves the process's own fds 0 and 1 aside first (stdout goes to stderr),
    so the kernel, started after that, can never write into the protocol stream.
    """
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await session.start()
        try:
            if session.isolation.warning:
                _say(session.isolation.warning)
            _say(
                f"serving on stdio; notebook {session.notebook_path}; "
                f"sandbox: {session.isolation.note}"
            )
            server = build_server(session, heartbeat_s=heartbeat_s, transport="stdio")
            await server.run(read, write, server.create_initialization_options())
        finally:
            await session.close()


class BearerAuth:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = (
                    b'{"error": "invalid_token", '
                    b'"error_description": "a valid bearer token is required"}'
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer error="invalid_token"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve_http(
    session: Session,
    *,
    host: str,
    port: int,
    token: str | None,
    heartbeat_s: float = 5.0,
    limits: Any = None,
    log_level: str = "WARNING",
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp``; ``token`` None means no auth.

    The server is :func:`~kernel_agent.frontends.httpd.build_server`'s (timeouts, a cap on
    connections); :class:`~kernel_agent.frontends.mcp_sessions.SessionCap` bounds the MCP
    sessions."""
    from ..edges.webguard import HostGuard, is_loopback_host
    from .httpd import build_server as http_server
    from .mcp_sessions import MCP_IDLE_S, MCP_SESSIONS, SessionCap

    await session.start()
    try:
        if session.isolation.warning:
            _say(session.isolation.warning)
        server = build_server(session, heartbeat_s=heartbeat_s, transport="http")
        app: Any = server.streamable_http_app(
            host=host, streamable_http_path="/mcp", session_idle_timeout=MCP_IDLE_S,
            max_sessions=MCP_SESSIONS + 8,
        )  # fmt: skip
        app = SessionCap(app, path="/mcp", total=MCP_SESSIONS)
        if token is not None:
            app = BearerAuth(app, token)
        # Host and Origin for every bind address, not only the ones the SDK knows
        app = HostGuard(app, loopback_only=is_loopback_host(host), same_origin=False)

        async def interrupt() -> None:  # a cell running at SIGTERM stops, and is recorded
            if session.executor is not None:
                await session.interrupt()

        web = http_server(
            app, host=host, port=port, limits=limits, on_stop=interrupt, graceful_s=3,
            log_level=log_level,
        )  # fmt: skip
        shown = f"[{host}]" if ":" in host else host
        _say(
            f"serving on http://{shown}:{port}/mcp "
            f"({'bearer token required' if token else 'NO AUTH'}); "
            f"notebook {session.notebook_path}; sandbox: {session.isolation.note}"
        )
        await web.serve()
    finally:
        await session.close()
