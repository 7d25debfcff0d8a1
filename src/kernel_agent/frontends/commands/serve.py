"""``kernel-agent serve``: persistent sandboxed sessions over HTTP, with a web page."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...settings import add_model_options
from ..httpd import add_http_options, limits_from_args
from .mcp import _is_loopback
from .run import settings_from_args

__all__ = ["register", "run", "TOKEN_ENV"]

#: Where the bearer token may come from instead of ``--token`` (kept out of the kernels).
TOKEN_ENV = "KERNEL_AGENT_SERVE_TOKEN"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve sessions (kernels, files, agent runs) over HTTP, with a web page",
        description="Serve persistent, sandboxed kernel sessions over HTTP: create a session, "
        "upload files, execute code or agent tasks (streamed as Server-Sent Events), download "
        "the notebook and files. Idle sessions expire; a web page at / shows them live.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--token",
        help=f"bearer token clients must send (env {TOKEN_ENV}); "
        "without one the server binds loopback only",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients may reach this server by, besides loopback names and IP "
        "addresses (repeatable; others get 421: DNS rebinding)",
    )
    p.add_argument(
        "--allow-local-models",
        action="store_true",
        help="let clients pick 'local' or 'local:PATH' (a GGUF file on this host) as a "
        "session's model",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        help="notebooks, files and the session index (default <home>/serve)",
    )
    p.add_argument(
        "--session-ttl",
        type=float,
        default=7200.0,
        metavar="S",
        help="seconds of inactivity before a session is culled (default 7200)",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=20,
        metavar="N",
        help="live sessions at most (default 20)",
    )
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=4,
        metavar="N",
        help="cells or runs executing at once (default 4)",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=32,
        metavar="N",
        help="requests waiting for --max-concurrent before 429 (default 32)",
    )
    p.add_argument(
        "--pool", type=int, default=0, metavar="N", help="warm pre-started kernels (default 0)"
    )
    p.add_argument(
        "--max-file-mb", type=float, default=100.0, help="largest upload in MB (default 100)"
    )
    p.add_argument(
        "--max-session-mb",
        type=float,
        default=1024.0,
        help="files per session in MB (default 1024)",
    )
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_http_options(p)
    add_model_options(p)
    p.set_defaults(func=run)


def _say(text: str) -> None:
    print(f"kernel-agent serve: {text}", file=sys.stderr, flush=True)


def config_from_args(args: argparse.Namespace) -> Any:
    from ...service import ServiceConfig

    if args.token:
        from ..httpd import argv_secret_warning

        print(argv_secret_warning("serve", "--token", TOKEN_ENV), file=sys.stderr, flush=True)
    if not 0 < args.port < 65536:
        raise ConfigError(f"port must be between 1 and 65535, got {args.port}")
    for name in ("session_ttl", "max_sessions", "max_concurrent", "max_file_mb", "max_session_mb"):
        if getattr(args, name) <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    if args.pool < 0 or args.max_queue < 0:
        raise ConfigError("--pool and --max-queue cannot be negative")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if token is None and not _is_loopback(args.host):
        raise ConfigError(f"without a token the server binds loopback only, not {args.host}: "
                          f"set --token or {TOKEN_ENV}")  # fmt: skip
    settings = settings_from_args(args)
    return ServiceConfig(
        settings=settings,
        state_dir=(args.state_dir or settings.home / "serve").resolve(),
        token=token,
        session_ttl=args.session_ttl,
        max_sessions=args.max_sessions,
        max_concurrent=args.max_concurrent,
        max_queue=args.max_queue,
        pool=args.pool,
        max_file_bytes=int(args.max_file_mb * 1024 * 1024),
        max_session_bytes=int(args.max_session_mb * 1024 * 1024),
        host=args.host,
        allowed_hosts=tuple(args.allowed_host),
        allow_local_models=args.allow_local_models,
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    config = config_from_args(args)
    limits = limits_from_args(args)
    import asyncio
    import signal

    from ...service import create_app
    from ..httpd import build_server

    app = create_app(config)
    server = build_server(
        app, host=args.host, port=args.port, limits=limits, on_stop=app.state.manager.stopping,
        graceful_s=config.stop_grace + 3, log_level=args.log_level,
    )  # fmt: skip
    shown = f"[{args.host}]" if ":" in args.host else args.host
    if config.token is None:
        _say("no token: bound to loopback only, and anyone on this machine can run code here")
    auth = "bearer token required" if config.token else "NO AUTH"
    _say(f"serving on http://{shown}:{args.port}/ ({auth}); "
         f"state in {config.state_dir}; warm pool {config.pool}")  # fmt: skip
    if not _is_loopback(args.host) and not config.allowed_hosts:
        _say("clients must use an IP address: pass --allowed-host NAME for each host name "
             "they reach this server by (others get 421)")  # fmt: skip
    # uvicorn turns SIGTERM into a graceful exit (every session finalised), then re-raises
    # it to the handler it found: this one, which lets the command end normally (status 0)
    stopped: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.append(signum))
    asyncio.run(server.serve())
    _say("stopped; every notebook is finalised")
    return 0
