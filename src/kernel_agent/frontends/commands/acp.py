"""``kernel-agent acp``: the agent for Agent Client Protocol clients (Jupyter AI, Zed), on stdio."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
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
        help="serve the agent to an Agent Client Protocol client (Jupyter AI, Zed) on stdio",
        description="Speak the Agent Client Protocol on stdin/stdout: each prompt is a task; "
        "the model's words stream back, each cell is a tool call, --approve asks the client "
        "before each cell. With --jupyter-url and --notebook the cells go into that notebook, "
        "open in JupyterLab, and run in its own kernel.",
    )
    p.add_argument(
        "--notebook",
        type=Path,
        help="with --jupyter-url: the notebook on the server to work in (as the server names "
        "it); without it, each session's first prompt names its notebook (a resource link)",
    )
    p.add_argument(
        "--approve", action="store_true", help="ask the client's permission before each cell"
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
    if target is not None:
        print(warning_line(target.url), file=sys.stderr, flush=True)
    settings = settings_from_args(args)
    from ..acp_agent import KernelAgentACP

    agent = KernelAgentACP(settings, target=target, approve=args.approve)
    asyncio.run(_serve(agent))
    return 0


async def _serve(agent: Any) -> None:
    """Serve on the process's stdin/stdout, moved aside first: fd 1 becomes stderr, so a
    kernel started later can never write into the protocol stream."""
    from acp import run_agent

    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), proto_in)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, proto_out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        await run_agent(agent, writer, reader)
    finally:
        await agent.close()
