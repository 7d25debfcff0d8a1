"""The ``kernel-agent`` command: argument parsing and the one place errors become messages.

Each subcommand lives in ``kernel_agent.frontends.commands.<name>`` and exposes
``register(subparsers)`` (adds its parser, sets ``func``) and raises
:class:`~kernel_agent.errors.KernelAgentError` for anything a user should read.
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from importlib import import_module

from ..errors import KernelAgentError, Terminated

__all__ = ["main", "build_parser"]


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = ("run", "verify", "export", "mcp", "acp", "serve", "observe", "local")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernel-agent",
        description="An LLM agent that analyses data in a live Jupyter kernel "
        "and leaves a reproducible notebook.",
    )
    from ..version import __version__

    parser.add_argument("--version", action="version", version=f"kernel-agent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = import_module(f"kernel_agent.frontends.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"kernel_agent.frontends.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    commands = (
        set(parser._subparsers._group_actions[0].choices or ()) if parser._subparsers else set()
    )
    # `kernel-agent TASK` is a shortcut for `kernel-agent run TASK`.
    if (
        argv
        and "run" in commands
        and argv[0] not in commands
        and argv[0] not in ("-h", "--help", "--version")
    ):
        argv.insert(0, "run")
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    from ..errors import UnsandboxedKernelWarning

    # the CLI says this itself (a notice when auto fell back; the user's flag otherwise)
    warnings.filterwarnings("ignore", category=UnsandboxedKernelWarning)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args) or 0)
    except KernelAgentError as exc:
        print(f"kernel-agent: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(
            f"kernel-agent: {'terminated' if terminated else 'interrupted'}; "
            "the notebook keeps every finished cell",
            file=sys.stderr,
        )
        return 143 if terminated else 130
    finally:
        signal.signal(signal.SIGTERM, previous)
