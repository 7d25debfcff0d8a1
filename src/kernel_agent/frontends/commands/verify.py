"""``kernel-agent verify NOTEBOOK``: re-execute in a fresh kernel, report per cell.

Exit 0 when every code cell reproduces its stored outputs; otherwise the first
differing cell and a short diff are printed and the exit code is
:attr:`VerifyMismatch.exit_code <kernel_agent.errors.VerifyMismatch>`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from ...errors import ConfigError, one_line

__all__ = ["register", "run", "print_report", "terminal_ask"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="re-execute a notebook in a fresh kernel and check it reproduces",
        description="Re-execute NOTEBOOK top to bottom in a fresh kernel of its kernelspec and "
        "compare every cell's outputs with the stored ones (memory addresses, timestamps, "
        "durations, random ids and traceback cell names are ignored; images are compared "
        "by pixels). Exits 0 when it reproduces.",
    )
    parser.add_argument("notebook", metavar="NOTEBOOK", type=Path, help="the .ipynb to verify")
    parser.add_argument(
        "--write", metavar="PATH", type=Path, help="save the re-executed notebook here"
    )
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=120.0,
        help="per-cell timeout in seconds (120)",
    )
    parser.add_argument(
        "--image-tolerance",
        metavar="X",
        type=float,
        default=None,
        help="fraction of an image's pixels allowed to differ, 0 for pixel-exact (default 0.01)",
    )
    parser.add_argument("--kernel", metavar="NAME", help="kernel to use instead of the notebook's")
    parser.add_argument(
        "--record", action="store_true", help="store the verdict in NOTEBOOK's metadata"
    )
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "none"),
        help="isolate the kernel, as runs do (default auto)",
    )
    parser.add_argument(
        "--install",
        metavar="POLICY",
        default="never",
        help="whether to install the packages the notebook's metadata names (pip, wheels "
        "only, onto this host): never (default: refuse), ask, allow:pkg1,pkg2 or any",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError(f"timeout must be positive, got {args.timeout:g}")
    if args.image_tolerance is not None and not 0 <= args.image_tolerance <= 1:
        raise ConfigError(f"image tolerance must be between 0 and 1, got {args.image_tolerance:g}")
    from ...notebook.verify import record_verdict, verify_notebook
    from ...sandbox import make_launcher
    from ...settings import Settings
    from ...tools.installs import InstallPolicy

    # the flag only: KERNEL_AGENT_INSTALL is for runs, never for someone else's notebook
    policy = InstallPolicy.parse(args.install)

    cwd = args.notebook.resolve().parent
    launcher = make_launcher(Settings.from_env(sandbox=args.sandbox), cwd)
    if launcher.status.warning():
        print(f"kernel-agent: {launcher.status.warning()}", file=sys.stderr)
    report = verify_notebook(
        args.notebook,
        kernel_name=args.kernel,
        timeout=args.timeout,
        image_tolerance=args.image_tolerance,
        write=args.write,
        cwd=cwd,
        launcher=launcher,
        install=policy,
        ask_install=terminal_ask(args.notebook) if policy.mode == "ask" else None,
    )
    print_report(report)
    if args.record:
        record_verdict(args.notebook, report)
    report.raise_for_mismatch()
    return 0


def terminal_ask(notebook: Path) -> Callable[[str], Awaitable[bool]] | None:
    """``--install ask``: a y/N question on the terminal (None without one)."""
    if sys.stdin is None or not sys.stdin.isatty():
        return None

    async def ask(requirements: str) -> bool:
        print(
            f"{one_line(notebook.name, 80)} asks to install {requirements} "
            "(wheels from your package index, into a scratch directory on this host). "
            "Install? [y/N] ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        answer = await asyncio.to_thread(sys.stdin.readline)
        return answer.strip().lower() in ("y", "yes")

    return ask


def print_report(report: Any, out: TextIO | None = None) -> None:
    """The per-cell report as plain lines, every one through :func:`visible`: the
    notebook, its outputs and the re-executed ones are a stranger's text."""
    from ...edges.escapes import visible

    out = out or sys.stdout

    def say(line: str) -> None:
        print(visible(line), file=out)

    say(f"verify {report.path} in a fresh {report.kernel_name!r} kernel")
    for check in report.cells:
        count = "" if check.execution_count is None else str(check.execution_count)
        status = check.status.replace("_", " ")
        line = f"  code cell {check.number:>3}  In [{count:>2}]  {status:<8}"
        if check.seconds is not None:
            line += f"  {check.seconds:7.2f} s"
            if check.original_seconds is not None:
                line += f" (was {check.original_seconds:.2f} s)"
        if check.problems:
            line += f"  {check.problems[0]}"
        say(line.rstrip())
    first = report.first_difference
    if first is not None:
        say(f"first difference: {first.label}, notebook cell {first.index}")
        for problem in first.problems:
            say(f"  {problem}")
        for line in first.diff:
            say(f"  {line}")
    timing = f"kernel start {report.startup_s:.2f} s, cells {report.execute_s:.2f} s"
    if report.original_s is not None:
        timing += f" (originally {report.original_s:.2f} s)"
    same = sum(c.status == "same" for c in report.cells)
    say(f"{report.verdict}: {same}/{len(report.cells)} code cells reproduced; {timing}")
    if report.written is not None:
        say(f"wrote the re-executed notebook to {report.written}")
