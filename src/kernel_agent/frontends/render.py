"""Render agent events in a terminal with rich (live progress on stderr).

stdout carries only the final result in the chosen ``--format``; everything live
(streamed tokens, cells, outputs, spinner) goes to stderr, so
``kernel-agent --format json ... | jq`` works.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax

from ..edges.escapes import visible
from ..edges.images import IMAGE_EXTENSIONS
from ..edges.safefs import write_beneath
from ..errors import UnsafePath
from ..events import (
    Answer,
    CellFinished,
    CellOutput,
    CellSkipped,
    CellStarted,
    Event,
    EventHandlers,
    ModelDelta,
    ModelReply,
    Notice,
    RunFinished,
    RunResult,
    RunStarted,
)
from ..results import strip_ansi

__all__ = ["EventRenderer", "print_result", "save_images", "summary_line", "visible"]


def save_images(result_outputs: list[Any], folder: Path, step: int) -> list[Path]:
    """Write the images of one cell next to the notebook; returns their paths.

    ``folder``'s parent is trusted; below it nothing is followed (a link planted at
    ``folder`` or at an image's name fails the write instead of redirecting it).
    """
    paths = []
    for index, out in enumerate(result_outputs):
        for mime, ext in IMAGE_EXTENSIONS.items():
            data = out.get("data", {}).get(mime)
            if data is None:
                continue
            name = f"cell{step}_{index}.{ext}"
            if mime == "image/svg+xml":
                raw = (data if isinstance(data, str) else "".join(data)).encode("utf-8")
            else:
                raw = base64.b64decode(data)
            write_beneath(folder.parent, f"{folder.name}/{name}", raw)
            paths.append(folder / name)
            break
    return paths


class EventRenderer(EventHandlers):
    """Shows a run as it happens. ``quiet`` keeps only notices and errors."""

    def __init__(self, console: Console, *, quiet: bool = False, show_code: bool = True) -> None:
        self.console = console
        self.quiet = quiet
        self.show_code = show_code
        self.notebook: Path | None = None
        self._status: Any = None
        self._live: Any = None
        self._stream_text = ""

    def _end_stream(self) -> None:
        """Clear the transient view of the streaming reply (its text is printed elsewhere)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._stream_text = ""

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _on_RunStarted(self, event: RunStarted) -> None:
        self.notebook = event.notebook
        if not self.quiet:
            self.console.print(
                f"[bold]kernel-agent[/] · model [cyan]{event.model}[/] · {event.protocol} · "
                f"notebook [green]{event.notebook}[/]",
                highlight=False,
            )

    def _on_ModelDelta(self, event: ModelDelta) -> None:
        if self.quiet or not self.console.is_terminal:
            return
        from rich.live import Live
        from rich.text import Text

        self._stream_text += event.text
        tail = "\n".join(self._stream_text.splitlines()[-12:])
        view = Text(visible(tail), style="dim")
        if self._live is None:
            self._live = Live(view, console=self.console, transient=True, refresh_per_second=12)
            self._live.start()
        else:
            self._live.update(view)

    def _on_ModelRetracted(self, event: Event) -> None:
        self._stream_text = ""  # a retry streams the reply again from the start

    def _on_ModelReply(self, event: ModelReply) -> None:
        self._end_stream()
        if not self.quiet:
            self.console.print(visible(event.text), style="italic", markup=False, highlight=False)

    def _on_CellStarted(self, event: CellStarted) -> None:
        self._end_stream()
        if self.quiet:
            return
        if self.show_code:
            self.console.print(
                Panel(
                    Syntax(visible(event.code), "python", theme="ansi_dark", word_wrap=True),
                    title=f"cell {event.step}",
                    title_align="left",
                    border_style="blue",
                )
            )
        if self.console.is_terminal:
            self._status = self.console.status("running…", spinner="dots")
            self._status.start()

    def _on_CellOutput(self, event: CellOutput) -> None:
        if self.quiet:
            return
        out = event.output
        kind = out.get("output_type")
        if kind == "stream":
            self.console.print(
                visible(out.get("text", "")),
                end="",
                markup=False,
                highlight=False,
                style="red" if out.get("name") == "stderr" else None,
            )
        elif kind == "error":
            traceback = visible(strip_ansi("\n".join(out.get("traceback", []))))
            self.console.print(traceback, style="red", markup=False, highlight=False)
        else:
            data = out.get("data", {})
            image = next((m for m in IMAGE_EXTENSIONS if m in data), None)
            if image:
                self.console.print(f"[magenta][{image} image][/]")
            elif "text/plain" in data:
                self.console.print(visible(data["text/plain"]), markup=False, highlight=False)

    def _on_CellFinished(self, event: CellFinished) -> None:
        self._stop_spinner()
        result = event.result
        if self.notebook is not None:
            folder = self.notebook.with_name(self.notebook.stem + "_files")
            try:
                saved = save_images(result.outputs, folder, event.step)
            except (OSError, UnsafePath) as exc:
                saved = []
                self.console.print(f"[yellow]images not saved: {escape(visible(str(exc)))}[/]")
            for path in saved:
                self.console.print(f"[magenta]image saved:[/] {escape(str(path))}", highlight=False)
        if result.status != "ok" and result.status != "error":
            error = escape(visible(str(result.error)))
            self.console.print(f"[yellow]{result.status}:[/] {error}", highlight=False)
        elif not self.quiet:
            colour = "green" if result.ok else "red"
            self.console.print(
                f"[{colour}]{result.status}[/] in {result.duration:.2f}s", highlight=False
            )

    def _on_CellSkipped(self, event: CellSkipped) -> None:
        self.console.print(f"[yellow]cell {event.step} skipped[/]")

    def _on_Notice(self, event: Notice) -> None:
        self._end_stream()
        style = "bold yellow" if event.level == "warning" else "cyan"
        self.console.print(
            f"[{style}]kernel-agent: {escape(visible(event.text))}[/]", highlight=False
        )

    def _on_Answer(self, event: Answer) -> None:
        self._end_stream()
        self._stop_spinner()

    def _on_RunFinished(self, event: RunFinished) -> None:
        self._stop_spinner()


def print_result(console: Console, err: Console, result: RunResult, fmt: str) -> None:
    """The final output on stdout (``console``); a summary line on stderr (``err``)."""
    if fmt == "json":
        console.print_json(json.dumps(result.as_dict()))
        return
    if fmt == "plain":
        console.print(visible(result.answer), markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(Markdown(visible(result.answer) or "_(no answer)_"))
    err.print(summary_line(result), style="dim", highlight=False, markup=False)


def summary_line(result: RunResult) -> str:
    """One line: status, cells, tokens, cost, the model/kernel time split, the notebooks."""
    tail = f"status {result.status} · {len(result.cells)} cells · {result.usage.text()}"
    if result.cost is not None:
        tail += f" · ${result.cost:.4f}"
    tail += (
        f" · {result.duration_s:.1f}s (model {result.model_time_s:.1f}s, "
        f"kernel {result.kernel_time_s:.1f}s) · notebook {result.notebook}"
    )
    if result.clean_notebook:
        tail += f" · clean {result.clean_notebook}"
    if result.verify:
        tail += f" · verify {result.verify.get('verdict')}"
    return tail
