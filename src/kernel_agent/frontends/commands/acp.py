"""``kernel-agent acp``: kernel-agent as an Agent Client Protocol agent over stdio."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ...settings import add_model_options
from .run import settings_from_args

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "acp",
        help="serve kernel-agent to an Agent Client Protocol client (Jupyter AI, Zed)",
        description="Speak the Agent Client Protocol on stdin/stdout, for Jupyter AI v3 "
        "(jupyter-ai-acp-client) and editors such as Zed. Each ACP session is one sandboxed "
        "kernel that sees the session's directory read-only; each prompt runs the agent, "
        "each cell is reported as a tool call, and the notebooks go to <cwd>/notebooks.",
    )
    p.add_argument(
        "--approve",
        action="store_true",
        help="ask the client's permission before each cell (allow once / always / reject)",
    )
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_model_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    settings = settings_from_args(args)
    import asyncio

    from ..acp_agent import serve_stdio

    asyncio.run(serve_stdio(settings, approve=args.approve))
    return 0
