"""``kernel-agent run TASK``: one task, a task from stdin, or an interactive chat."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...jupyter.attach import add_jupyter_options, jupyter_target, warning_line
from ...settings import add_model_options, option_flags
from ..approval import ask_until_decided, read_code_until_dot

if TYPE_CHECKING:
    from rich.console import Console

    from ...settings import Settings

__all__ = ["register", "settings_from_args"]


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by the options given (and --verify)."""
    from ...settings import Settings

    if getattr(args, "api_key", None):
        print(
            "kernel-agent: warning: an API key given with --api-key is visible to other users "
            "of this machine (in the process list); prefer the OPENAI_API_KEY environment variable",
            file=sys.stderr,
        )
    run_only = ("verify", "tool_timeout", "install")  # flags of `run` alone
    values = {n: getattr(args, n, None) for n in (*option_flags(), *run_only)}
    values["files"] = tuple(values["files"] or ()) or None
    values["tools"] = tuple(args.tools) if getattr(args, "tools", None) else None
    values["ask_result"] = True if getattr(args, "ask_result", None) else None
    if values.pop("prices", None):  # over the environment's, which are over the built-ins
        values["prices"] = ",".join([os.environ.get("KERNEL_AGENT_PRICES", ""), *args.prices])
    return Settings.from_env(**values)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="work on a task in a live kernel",
        description="Work on TASK in a live Jupyter kernel and write the notebook.",
    )
    p.add_argument("task", nargs="*", help="the task; '-' or none reads stdin")
    p.add_argument("-i", "--input", dest="input_text", help="the task as one string")
    p.add_argument("--interactive", action="store_true", help="chat: several tasks in one kernel")
    p.add_argument(
        "--notebook",
        "-o",
        type=Path,
        help="where the transcript goes (default notebooks/<time>-<task>.ipynb); with "
        "--jupyter-url, the notebook on the server to work in (as the server names it)",
    )
    p.add_argument(
        "--transcript",
        type=Path,
        help="with --jupyter-url: where the local transcript goes "
        "(default notebooks/<time>-<task>.ipynb)",
    )
    p.add_argument(
        "--approve", action="store_true", help="ask before each cell: run / skip / edit / quit"
    )
    p.add_argument(
        "--format",
        choices=("markdown", "json", "plain"),
        default="markdown",
        help="final output format",
    )
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress")
    p.add_argument(
        "--verify",
        action="store_true",
        default=None,
        help="re-run the clean notebook in a fresh kernel at the end and record the verdict",
    )
    t = p.add_argument_group("code that reaches back to the host")
    t.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:NAME",
        help="host functions the kernel's code may call with call_tool(): "
        "package.module:name, a function or a list of them (repeatable)",
    )
    t.add_argument("--tool-timeout", type=float, help="seconds per host tool call (default 60)")
    t.add_argument(
        "--result",
        dest="ask_result",
        action="store_true",
        help="ask the model to declare a structured result with set_result() "
        "(--format json prints it and its files)",
    )
    t.add_argument(
        "--install",
        metavar="POLICY",
        help="install_package() policy: never (default), ask, allow:pkg1,pkg2 or any",
    )
    add_model_options(p)
    add_jupyter_options(p)
    p.set_defaults(func=run_command)


def _read_task(args: argparse.Namespace) -> str:
    if args.input_text is not None:
        return args.input_text
    if args.task and args.task != ["-"]:
        return " ".join(args.task)
    if args.interactive:
        return ""
    if sys.stdin is None or sys.stdin.isatty() and args.task != ["-"]:
        raise ConfigError('no task given: kernel-agent run "TASK" (or pipe it on stdin)')
    return sys.stdin.read()


def run_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    target = jupyter_target(args, args.notebook)
    if target is not None:
        print(warning_line(target.url), file=sys.stderr, flush=True)
    elif args.transcript is not None:
        raise ConfigError("--transcript goes with --jupyter-url (else --notebook names it)")
    task = _read_task(args).strip()
    if not task and not args.interactive:
        raise ConfigError("the task is empty")
    settings = settings_from_args(args)
    notebook = args.notebook if target is None else args.transcript
    if notebook is not None:
        _check_writable(notebook)
    from rich.console import Console

    from ...agent import Agent
    from ..render import EventRenderer

    out = Console(soft_wrap=True)
    err = Console(stderr=True, soft_wrap=True)
    _prepare_local_model(settings, err)
    render = EventRenderer(err, quiet=args.quiet or args.format == "json")
    approve = _terminal_approver(err) if args.approve else None
    extend = _terminal_extender(err) if args.approve or args.interactive else None
    attached: dict[str, Any] = {}
    if target is not None:
        attached = _attach(target, settings)
        if notebook is None:
            from ...agent import default_notebook_path

            notebook = default_notebook_path(settings, task or "jupyter")
    context = attached.pop("context", None)
    with Agent(settings, notebook=notebook, approve=approve, extend=extend, **attached) as agent:
        try:
            if attached:
                _seed(agent, attached, task)
            return _tasks(agent, task, args, render, out, err, context)
        finally:
            if attached:  # the notebook's kernel stays; its document is let go
                attached["loop"].run(attached["executor"].shutdown())


def _tasks(
    agent: Any,
    task: str,
    args: argparse.Namespace,
    render: Any,
    out: Console,
    err: Console,
    context: Callable[[str], str] | None,
) -> int:
    """Run the task (or the chat's tasks); the exit status of the last."""
    from ...events import RunFinished
    from ..render import print_result

    status = 0
    tasks = [task] if task else []
    while True:
        if not tasks:
            if not args.interactive:
                break
            nxt = _prompt_task(err)
            if nxt is None:
                break
            tasks.append(nxt)
        current = tasks.pop(0)
        if context is not None:
            current = context(current)
        result = None
        try:
            for event in agent.run(current):
                render(event)
                if isinstance(event, RunFinished):
                    result = event.result
        except KeyboardInterrupt:
            if not args.interactive:
                raise
            err.print("[yellow]interrupted; the kernel and its state are kept[/]")
            continue
        assert result is not None
        print_result(out, err, result, args.format)
        status = 0 if result.ok else 1
    return status


def _attach(target: Any, settings: Settings) -> dict[str, Any]:
    """The Agent's arguments for the notebook open on a Jupyter server (started here).

    The executor is started on the loop the agent will run on; ``context`` adds what
    the notebook and its kernel hold to each task (the model sees them as ``%%agent``'s).
    """
    from ...jupyter.context import notebook_context, with_context
    from ...syncify import BackgroundLoop

    loop = BackgroundLoop()
    executor = target.executor(settings)
    try:
        loop.run(executor.start())
    except BaseException:
        loop.run(executor.shutdown())
        loop.close()
        raise

    def context(task: str) -> str:
        text, namespace = loop.run(notebook_context(executor))
        return with_context(task, text, namespace)

    namespace = loop.run(notebook_context(executor))[1]
    return {
        "loop": loop,
        "executor": executor,
        "namespace": namespace,
        "provenance": {"jupyter_notebook": target.path},
        "context": context,
    }


def _seed(agent: Any, attached: dict[str, Any], task: str) -> None:
    """Start the agent, then put the notebook's code cells at its transcript's top."""
    from ...jupyter.context import record_user_cells

    attached["loop"].run(agent.aio.start(task))
    record_user_cells(agent.aio.state.transcript, attached["executor"].doc)


def _prepare_local_model(settings: Settings, err: Console) -> None:
    """Assemble the bundled model up front, with a progress bar (a no-op once it is cached)."""
    from ...llm.endpoint import is_local

    if not is_local(settings):
        return
    from ...llm.local_model import resolve_local_model, rich_progress

    with rich_progress(console=err) as progress:
        resolve_local_model(settings.model or "local", settings.home, progress)


def _check_writable(path: Path) -> None:
    """Fail before the run starts if the transcript could not be written."""
    if path.is_dir():
        raise ConfigError(f"notebook path is a directory: {path}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(13, "permission denied")
    except OSError as exc:
        raise ConfigError(f"cannot write the notebook at {path}: {exc.strerror or exc}") from None


def _ask(question: str) -> str:
    """input(), with the question on stderr unless we talk to a terminal (stdout stays clean)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return input(question)
    sys.stderr.write(question)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _prompt_task(err: Console) -> str | None:
    while True:
        try:
            line = _ask("kernel-agent> ")
        except EOFError:
            err.print()
            return None
        except KeyboardInterrupt:
            err.print()
            return None
        line = line.strip()
        if line in ("/exit", "/quit", "exit", "quit"):
            return None
        if line:
            return line


def _terminal_approver(err: Console) -> Callable[[str, int], tuple[str, str | None]]:
    from rich.syntax import Syntax

    from ..render import visible

    def approve(code: str, step: int) -> tuple[str, str | None]:
        err.print(Syntax(visible(code), "python", theme="ansi_dark", line_numbers=True))
        return ask_until_decided(code, step, _ask, _edit)

    return approve


def _terminal_extender(err: Any) -> Any:
    """Ask whether a budget that would stop the run is raised by its amount once more."""

    def extend(stop: Any) -> bool:
        err.print(f"kernel-agent: {stop.text()}", style="yellow", markup=False, highlight=False)
        try:
            answer = _ask(f"extend {stop.flag} by as much again? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in ("y", "yes")

    return extend


def _edit(code: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if editor:
        with tempfile.NamedTemporaryFile("w+", suffix=".py", delete=False) as fh:
            fh.write(code)
        try:
            subprocess.run([*editor.split(), fh.name], check=False)
            return Path(fh.name).read_text()
        finally:
            os.unlink(fh.name)
    return read_code_until_dot(lambda: _ask(""), lambda text: print(text, file=sys.stderr))
