"""``kernel-agent mcp``: serve a kernel-agent session to any MCP client (stdio or HTTP)."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...jupyter.attach import add_jupyter_options, jupyter_target, warning_line
from ...settings import add_model_options
from ..httpd import add_http_options, limits_from_args
from .run import settings_from_args

__all__ = ["register", "run", "TOKEN_ENV"]

#: Where the HTTP bearer token may come from instead of ``--token`` (kept out of the kernel).
TOKEN_ENV = "KERNEL_AGENT_MCP_TOKEN"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve a sandboxed kernel and its notebook to any MCP client",
        description="Serve a persistent, sandboxed kernel to an outside agent over the Model "
        "Context Protocol: run_cell, list_variables, read_notebook, read_cell, restart_kernel, "
        "interrupt_kernel, verify_notebook, export_notebook and file tools confined to the work "
        "dir. Every cell goes into the notebook (--notebook) with its provenance.",
    )
    p.add_argument(
        "--notebook",
        "-o",
        type=Path,
        help="where the transcript goes (default notebooks/<time>-mcp.ipynb); with "
        "--jupyter-url, the notebook on the server to work in (as the server names it)",
    )
    p.add_argument(
        "--transcript",
        type=Path,
        help="with --jupyter-url: where the local transcript goes "
        "(default notebooks/<time>-mcp.ipynb)",
    )
    t = p.add_argument_group("transport")
    t.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    t.add_argument(
        "--host", default="127.0.0.1", help="address to bind with --http (default 127.0.0.1)"
    )
    t.add_argument("--port", type=int, default=8765, help="port for --http (default 8765)")
    t.add_argument(
        "--token",
        help=f"bearer token clients must send with --http (env {TOKEN_ENV}; "
        "default: a random one, printed)",
    )
    t.add_argument(
        "--no-auth", action="store_true", help="no token with --http (loopback addresses only)"
    )
    t.add_argument(
        "--heartbeat",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between progress notifications while a cell runs (default 5)",
    )
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_http_options(t)
    add_model_options(p)
    add_jupyter_options(p)
    _hide_model_flags(p)
    p.set_defaults(func=run)


def _hide_model_flags(parser: argparse.ArgumentParser) -> None:
    """The outside agent is the model: keep `run`'s model and loop flags out of --help."""
    for group in parser._action_groups:
        if group.title in ("model", "loop"):
            for action in group._group_actions:
                action.help = argparse.SUPPRESS
            group.title = None
            group.description = None


def _is_loopback(host: str) -> bool:
    from ...edges.webguard import is_loopback_host

    return is_loopback_host(host)


def _token(args: argparse.Namespace) -> str | None:
    if args.no_auth:
        if not _is_loopback(args.host):
            raise ConfigError(f"--no-auth is only allowed on a loopback address, not {args.host}")
        print(
            "kernel-agent mcp: WARNING: --no-auth: anyone who can reach "
            f"{args.host}:{args.port} can run code in this kernel",
            file=sys.stderr,
            flush=True,
        )
        return None
    if args.token:
        from ..httpd import argv_secret_warning

        print(argv_secret_warning("mcp", "--token", TOKEN_ENV), file=sys.stderr, flush=True)
    token = args.token or os.environ.get(TOKEN_ENV)
    if token:
        return str(token)
    token = secrets.token_urlsafe(32)
    print(f"kernel-agent mcp: bearer token: {token}", file=sys.stderr, flush=True)
    return token


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    target = jupyter_target(args, args.notebook)
    if target is not None:
        print(warning_line(target.url), file=sys.stderr, flush=True)
    elif args.transcript is not None:
        raise ConfigError("--transcript goes with --jupyter-url (else --notebook names it)")
    if args.heartbeat <= 0:
        raise ConfigError(f"heartbeat must be positive, got {args.heartbeat:g}")
    if args.http and not 0 < args.port < 65536:
        raise ConfigError(f"port must be between 1 and 65535, got {args.port}")
    if args.no_auth and not args.http:
        raise ConfigError("--no-auth only applies to --http")
    limits = limits_from_args(args)
    settings = settings_from_args(args)
    token = _token(args) if args.http else None
    import asyncio

    from ...session import Session
    from ..mcp_server import serve_http, serve_stdio

    if target is None:
        session = Session(
            settings, notebook=args.notebook, front_end="mcp", metadata={"source": "mcp"}
        )
    else:
        session = Session(
            settings,
            notebook=args.transcript,
            front_end="mcp",
            executor=target.executor(settings),
            own_executor=True,  # its shutdown leaves the notebook's kernel running
            metadata={"source": "mcp", "jupyter_notebook": target.path},
        )

    async def serve() -> None:
        if target is not None:
            await _attach(session)
        if args.http:
            await serve_http(
                session,
                host=args.host,
                port=args.port,
                token=token,
                heartbeat_s=args.heartbeat,
                limits=limits,
                log_level=args.log_level,
            )
        else:
            await serve_stdio(session, heartbeat_s=args.heartbeat)

    asyncio.run(serve())
    return 0


async def _attach(session: Any) -> None:
    """Start on the open notebook; its code cells go first in the transcript (for verify)."""
    from ...jupyter.context import record_user_cells

    try:
        await session.start()
        record_user_cells(session.state.transcript, session.executor.doc)
    except BaseException:
        await session.close()
        raise
