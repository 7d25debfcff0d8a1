"""``kernel-agent local status`` and ``kernel-agent local stop``: the kept-alive local model."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "local",
        help="show or stop the kept-alive local model server",
        description="The bundled local model's server stays loaded for "
        "KERNEL_AGENT_LOCAL_KEEP_ALIVE seconds after the last run. `status` shows each "
        "server of yours (pid, model, idle time left); `stop` stops them now.",
    )
    parser.add_argument("action", choices=("status", "stop"), help="what to do")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ...llm.local_admin import describe, servers, stop
    from ...settings import default_home

    found = servers(default_home() / "servers")
    if args.action == "status":
        for info in found:
            print(describe(info))
        if not any(info.running for info in found):
            print("no local model server is running")
        return 0
    for info in found:
        print(stop(info))
    if not found:
        print("no local model server is running")
    return 0
