"""The IPython extension: ``%load_ext kernel_agent``; ``%%agent``, ``%agent``, ``%agent_config``.

The agent works in *this* kernel, on the user's own variables, through
:class:`~kernel_agent.executors.inprocess.InProcessExecutor`: its code runs
**unsandboxed**, exactly as if the user had typed it. This module only parses
options and renders events; the loop is :class:`~kernel_agent.agent.Agent`'s.

- ``%%agent [options]`` with the task as the cell body, or ``%agent [options] TASK``.
  Options are the CLI's (``--model``, ``--base-url``, ``--protocol``, ``--max-steps``,
  ``--approve``, ``--notebook`` ...). The model's prose streams into the cell, the
  code's outputs appear inline as usual, each run writes its own transcript
  ``.ipynb``, and the result is ``_agent_result`` (:class:`AgentResult`).
- ``%agent_config [options]`` shows or sets the defaults of later runs.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from ..errors import ConfigError, HelpShown, KernelAgentError, MagicError
from ..events import (
    Answer,
    CellFinished,
    CellSkipped,
    CellStarted,
    EventHandlers,
    ModelDelta,
    ModelReply,
    ModelRetracted,
    Notice,
    RunFinished,
    RunResult,
    RunStarted,
)
from ..kernel_state.namespace import VariableInfo
from ..llm.protocol import split_code
from ..settings import Settings, add_model_options, option_flags
from .approval import ask_until_decided, read_code_until_dot

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["AgentMagics", "AgentResult", "load_ipython_extension", "unload_ipython_extension"]

UNSANDBOXED = (
    "%agent runs the model's code UNSANDBOXED, in this kernel: it can read and change "
    "your variables, files and environment (API keys included)."
)
#: The run flags that pick or isolate a kernel (field -> flag): meaningless when the
#: code runs in this one; and the settings fields the other run flags set.
_KERNEL_ONLY = option_flags("kernel")
_SETTING_NAMES = tuple(option_flags("model", "loop"))
_MAGIC_NAMES = ("approve", "notebook_dir", "quiet", "next_input")
_PRE = "font-family:monospace;font-size:12.5px;margin:0;background:transparent"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext kernel_agent``."""
    ipython.register_magics(AgentMagics)


def unload_ipython_extension(ipython: Any) -> None:
    magics = ipython.magics_manager.magics
    for kind, name in (("line", "agent"), ("cell", "agent"), ("line", "agent_config")):
        magics[kind].pop(name, None)


@dataclass
class AgentResult:
    """What one ``%agent`` run left behind (``_agent_result`` in the user's namespace)."""

    answer: str
    status: str
    #: the code of every cell the agent ran, in order (failed ones too)
    code_cells: list[str]
    notebook: Path | None
    #: the successful cells only (their code depends on what you defined before the run)
    clean_notebook: Path | None
    #: the full :class:`~kernel_agent.events.RunResult` (outputs, usage, timings)
    run: RunResult = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def code(self) -> str:
        """The code of the cells that succeeded, joined: what rebuilds the agent's work."""
        return "\n\n".join(c.code for c in self.run.cells if c.ok)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise ConfigError(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            print(message, file=sys.stderr)
        raise HelpShown()


def build_parser(prog: str, *, task: bool) -> argparse.ArgumentParser:
    """The options of ``%agent`` (``task=True``) and ``%agent_config``: the CLI's names."""

    parser = _Parser(prog=prog, add_help=True, allow_abbrev=False)
    if task:
        parser.add_argument("task", nargs="*", help="the task (or the cell body under %%%%agent)")
        parser.add_argument("--notebook", "-o", type=Path, help="this run's transcript path")
    parser.add_argument(
        "--notebook-dir", type=Path, help="where transcripts go (default notebooks/)"
    )
    parser.add_argument("--approve", action="store_true", default=None, help="ask before each cell")
    parser.add_argument("--no-approve", dest="approve", action="store_false", help="do not ask")
    parser.add_argument("--quiet", "-q", action="store_true", default=None, help="no live progress")
    parser.add_argument(
        "--no-next-input",
        dest="next_input",
        action="store_false",
        default=None,
        help="do not offer the code as the next input",
    )
    if not task:
        parser.add_argument("--reset", action="store_true", help="forget every default set here")
    add_model_options(parser)
    return parser


def _parse(parser: argparse.ArgumentParser, line: str) -> argparse.Namespace:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise ConfigError(f"cannot read the options: {exc}") from None
    args = parser.parse_args(argv)
    for name, flag in _KERNEL_ONLY.items():
        if getattr(args, name, None) is not None:
            raise ConfigError(f"{flag} does not apply to %agent: its code runs in this kernel")
    return args


@magics_class
class AgentMagics(Magics):
    """``%%agent``, ``%agent`` and ``%agent_config``."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        #: defaults set with %agent_config (option name -> value)
        self.defaults: dict[str, Any] = {}

    # ---------------------------------------------------------------- %agent
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Let the model work on a task in this kernel: ``%agent TASK`` or ``%%agent`` + task.

        Options: ``%agent --help``. Defaults: ``%agent_config``.
        """
        try:
            self._run(line, cell)
        except HelpShown:
            return
        except KernelAgentError as exc:
            raise MagicError(str(exc)) from None

    def _run(self, line: str, cell: str | None) -> None:
        from ..agent import Agent, default_notebook_path
        from ..events import RunFinished
        from ..executors.inprocess import InProcessExecutor

        assert self.shell is not None
        args = _parse(build_parser("%agent", task=True), line)
        task = " ".join(args.task)
        if cell is not None:
            task = f"{task}\n{cell}" if task else cell
        task = task.strip()
        if not task:
            raise ConfigError(
                "the task is empty: write it after %agent, or in the body of a %%agent cell"
            )
        options = self._effective(args)
        settings = self._settings(options)
        executor = InProcessExecutor(self.shell)
        namespace = executor.namespace_summary()
        view = _View(self.shell, quiet=bool(options.get("quiet")))
        approve = _approver(view) if options.get("approve") else None
        notebook = args.notebook or default_notebook_path(settings, task)
        result = None
        agent = Agent(
            settings, executor=executor, notebook=notebook, approve=approve, namespace=namespace
        )
        try:
            for event in agent.run(_with_context(task, namespace)):
                view(event)
                if isinstance(event, RunFinished):
                    result = event.result
        except KeyboardInterrupt:
            view.line(
                f"kernel-agent: interrupted{_so_far(agent)}; "
                "your variables are as the last cell left them"
            )
            return
        except KernelAgentError as exc:
            raise ConfigError(f"{exc}{_so_far(agent)}") from None
        finally:
            agent.close()
        assert result is not None
        self.shell.user_ns["_agent_result"] = AgentResult(
            answer=result.answer,
            status=result.status,
            code_cells=[c.code for c in result.cells],
            notebook=result.notebook,
            clean_notebook=result.clean_notebook,
            run=result,
        )
        code = self.shell.user_ns["_agent_result"].code
        if code and options.get("next_input", True) is not False:
            self.shell.set_next_input(code)

    def _effective(self, args: argparse.Namespace) -> dict[str, Any]:
        """Run options over %agent_config defaults (the environment is under both)."""
        options = dict(self.defaults)
        for name in (*_SETTING_NAMES, *_MAGIC_NAMES):
            value = getattr(args, name, None)
            if value is not None:
                options[name] = value
        return options

    @staticmethod
    def _settings(options: dict[str, Any]) -> Settings:
        values = {name: options.get(name) for name in _SETTING_NAMES}
        if options.get("notebook_dir") is not None:
            values["notebook_dir"] = options["notebook_dir"]
        return Settings.from_env(**values)

    # --------------------------------------------------------- %agent_config
    @line_magic
    def agent_config(self, line: str) -> None:
        """Show the defaults of ``%agent`` runs, or set them: ``%agent_config --model M ...``."""
        try:
            args = _parse(build_parser("%agent_config", task=False), line)
            if args.reset:
                self.defaults.clear()
            changes = {
                n: getattr(args, n)
                for n in (*_SETTING_NAMES, *_MAGIC_NAMES)
                if getattr(args, n, None) is not None
            }
            if changes:
                self._settings({**self.defaults, **changes})  # refuse bad values first
                self.defaults.update(changes)
            print(self._describe())
        except HelpShown:
            return
        except KernelAgentError as exc:
            raise MagicError(str(exc)) from None

    def _describe(self) -> str:
        options = self.defaults
        settings = self._settings(options)

        def origin(name: str) -> str:
            return "  (%agent_config)" if name in options else ""

        key = settings.api_key
        rows = [
            (
                "model",
                settings.model or "(default: local model, or gpt-4o-mini with an API key)",
                "model",
            ),
            ("base URL", settings.base_url or "(provider default)", "base_url"),
            (
                "API key",
                f"set (…{key[-4:]})" if key and len(key) > 8 else "set" if key else "not set",
                "api_key",
            ),
            ("protocol", settings.protocol, "protocol"),
            ("max steps", str(settings.max_steps), "max_steps"),
            (
                "cell timeout",
                f"{settings.cell_timeout:g} s (best effort in-process)",
                "cell_timeout",
            ),
            ("approval", "ask before each cell" if options.get("approve") else "off", "approve"),
            ("notebook dir", str(settings.notebook_dir), "notebook_dir"),
            (
                "next input",
                "off" if options.get("next_input") is False else "offer the code",
                "next_input",
            ),
        ]
        lines = ["kernel-agent: defaults of %agent in this kernel"]
        lines += [f"  {label:<13} {value}{origin(name)}" for label, value, name in rows]
        lines.append(f"WARNING: {UNSANDBOXED}")
        return "\n".join(lines)


# ---------------------------------------------------------------------- helpers
def _with_context(task: str, namespace: dict[str, VariableInfo], limit: int = 30) -> str:
    """The task, plus what the user's namespace already holds (the model cannot see it)."""
    if not namespace:
        return task
    items = list(namespace.values())
    shown = ", ".join(v.short() for v in items[:limit])
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return f"{task}\n\n(Variables already defined in this session: {shown}{more}.)"


def _so_far(agent: Agent) -> str:
    transcript = agent.transcript
    if transcript is None or not any(c.cell_type == "code" for c in transcript.cells):
        return ""
    return f" (transcript so far: {transcript.path})"


def _approver(view: _View) -> Callable[[str, int], tuple[str, str | None]]:
    from IPython.core.error import StdinNotImplementedError

    def approve(code: str, step: int) -> tuple[str, str | None]:
        view.code(step, code, pending=True)
        try:
            return ask_until_decided(
                code, step, input, lambda _: read_code_until_dot(lambda: input(), print)
            )
        except (EOFError, StdinNotImplementedError):
            view.line(
                "kernel-agent: cannot ask for approval here "
                "(this front end takes no input); stopping"
            )
            return "quit", None

    return approve


class _View(EventHandlers):
    """Renders agent events in the cell: rich displays under ipykernel, text in a terminal.

    The outputs of the agent's code are not rendered here: the shell shows them
    inline itself, as for any cell.
    """

    def __init__(self, shell: Any, *, quiet: bool = False) -> None:
        self.rich = hasattr(shell, "kernel")  # ipykernel: displays can be updated in place
        self.quiet = quiet
        self._text = ""
        self._handle: Any = None
        self._shown_at = 0.0
        self._asked: tuple[int, str] | None = None

    # primitives
    def show(self, markdown: str, plain: str, html: str | None = None) -> None:
        if self.rich:
            from IPython.display import display

            bundle = {"text/markdown": markdown, "text/plain": plain}
            if html is not None:
                bundle["text/html"] = html
            display(bundle, raw=True)
        else:
            print(plain, flush=True)

    def line(self, text: str) -> None:
        self.show(f"*{_md_escape(text)}*", text)

    def code(self, step: int, code: str, pending: bool = False) -> None:
        if self._asked == (step, code):
            return  # shown already, when approval was asked
        self._asked = (step, code) if pending else None
        label = f"cell {step}" + (" (waiting for approval)" if pending else "")
        self.show(
            f"`{label}`\n```python\n{code}\n```", f"── {label} ──\n{code}", _code_html(label, code)
        )

    def _stream(self, delta: str) -> None:
        self._text += delta
        if not self.rich:
            print(delta, end="", flush=True)
            return
        from IPython.display import display

        bundle = {"text/markdown": self._text, "text/plain": self._text}
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
            self._shown_at = time.monotonic()
        elif time.monotonic() - self._shown_at > 0.1:
            self._handle.update(bundle, raw=True)
            self._shown_at = time.monotonic()

    def _end_stream(self, final: str | None = None) -> bool:
        """Close the streamed reply, showing ``final`` in its place. False if nothing streamed."""
        streamed, text = self._text, self._text if final is None else final
        handle, self._handle, self._text = self._handle, None, ""
        if not streamed:
            return False
        if not self.rich:
            print(flush=True)
        elif handle is not None:
            handle.update({"text/markdown": text, "text/plain": text}, raw=True)
        return True

    # events
    def _on_RunStarted(self, event: RunStarted) -> None:
        if self.quiet:
            return
        plain = f"kernel-agent · {event.model} · {event.protocol} · transcript {event.notebook}"
        self.show(
            f"**kernel-agent** · `{event.model}` · {event.protocol} · "
            f"transcript `{event.notebook}`",
            plain,
        )

    def _on_ModelDelta(self, event: ModelDelta) -> None:
        if not self.quiet:
            self._stream(event.text)

    def _on_ModelRetracted(self, event: ModelRetracted) -> None:
        """A retry streams the reply again: drop the failed attempt's text."""
        self._text = ""
        if not self.rich:
            print(flush=True)
        elif self._handle is not None:
            self._handle.update({"text/markdown": "", "text/plain": ""}, raw=True)

    def _on_ModelReply(self, event: ModelReply) -> None:
        self._end_stream(event.text)

    def _on_CellStarted(self, event: CellStarted) -> None:
        self._end_stream(split_code(self._text, None)[1])
        if not self.quiet:
            self.code(event.step, event.code)

    def _on_CellFinished(self, event: CellFinished) -> None:
        result = event.result
        if result.status != "ok" and not self.quiet:
            self.line(f"cell {event.step}: {result.status}: {result.error}")

    def _on_CellSkipped(self, event: CellSkipped) -> None:
        self.line(f"cell {event.step} skipped")

    def _on_Notice(self, event: Notice) -> None:
        if event.level == "warning" or not self.quiet:
            self.line(f"kernel-agent: {event.text}")

    def _on_Answer(self, event: Answer) -> None:
        if not self._end_stream(event.text) and event.text:
            self.show(event.text, event.text)

    def _on_RunFinished(self, event: RunFinished) -> None:
        result = event.result
        self.line(
            f"{result.status} · {len(result.cells)} cells · {result.usage.text()} · "
            f"{result.duration_s:.1f} s · "
            f"transcript {result.notebook} · result in _agent_result"
        )


def _code_html(label: str, code: str) -> str:
    """The agent's code as a boxed, highlighted block (inline styles: no CSS needed)."""
    from html import escape

    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        body = highlight(
            code, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True, prestyles=_PRE)
        )
    except ImportError:  # pygments comes with IPython; stay plain without it
        body = f"<pre>{escape(code)}</pre>"
    return (
        '<div style="border-left:3px solid #4a7bd0;background:#f5f8fd;'
        'padding:2px 10px;margin:4px 0">'
        f'<div style="font:12px monospace;color:#4a7bd0">{escape(label)}</div>{body}</div>'
    )


def _md_escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)
