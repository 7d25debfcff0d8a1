"""``kernel-agent acp``: kernel-agent as an Agent Client Protocol agent over stdio."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from ...jupyter.attach import add_jupyter_options, jupyter_target, warning_line
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
        "each cell is reported as a tool call, and the notebooks go to <cwd>/notebooks. "
        "With --jupyter-url and --notebook the cells go into that notebook, open in "
        "JupyterLab, and run in its own kernel (unsandboxed).",
    )
    p.add_argument(
        "--approve",
        action="store_true",
        help="ask the client's permission before each cell (run once / always / skip / stop)",
    )
    p.add_argument(
        "--notebook",
        type=Path,
        help="with --jupyter-url: the notebook on the server to work in (as the server names "
        "it); without it, each session's first prompt names its notebook (a resource link)",
    )
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_model_options(p)
    add_jupyter_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    target = jupyter_target(args, args.notebook, per_prompt=True)
    if target is None and args.notebook is not None:
        from ...errors import ConfigError

        raise ConfigError("--notebook needs --jupyter-url (the notebooks go to <cwd>/notebooks)")
    if target is not None:
        print(warning_line(target.url), file=sys.stderr, flush=True)
    settings = settings_from_args(args)
    import asyncio

    from ..acp_agent import serve_stdio

    asyncio.run(serve_stdio(settings, approve=args.approve, target=target))
    return 0
