"""``kernel-agent observe [DIR]``: browse the runs in a notebooks directory, on loopback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..httpd import add_http_options, build_server, limits_from_args

__all__ = ["register", "run"]

HOST = "127.0.0.1"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "observe",
        help="a local web page over the runs in a notebooks directory",
        description="Serve a read-only page on 127.0.0.1 listing the runs in DIR (task, model, "
        "status, cells, tokens, duration, verify verdict); each run shows a timeline of model "
        "time against kernel time per step, beside its rendered notebook.",
    )
    p.add_argument(
        "directory", nargs="?", type=Path, default=Path("notebooks"), metavar="DIR",
        help="where the notebooks are (default ./notebooks)",
    )  # fmt: skip
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765)")
    add_http_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    directory: Path = args.directory.expanduser()
    if not directory.is_dir():
        raise ConfigError(f"no such directory: {directory}")
    if not 0 < args.port < 65536:
        raise ConfigError(f"port must be between 1 and 65535, got {args.port}")
    limits = limits_from_args(args)
    from ...observe import create_app

    server = build_server(create_app(directory), host=HOST, port=args.port, limits=limits)
    print(
        f"kernel-agent observe: http://{HOST}:{args.port}/ (runs in {directory.resolve()}; "
        "read-only; Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    server.run()
    return 0
