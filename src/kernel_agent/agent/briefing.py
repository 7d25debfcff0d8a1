"""What the model is told before it writes a cell: the kernel's libraries and its data files.

Both are asked of the kernel itself, as ``user_expressions`` beside an empty cell: no
execution count, no names left behind, nothing in the clean notebook. Small models
otherwise spend whole runs on a library that is not there or on guessing a column's
name (``row_mz`` for ``row m/z``).
"""

from __future__ import annotations

from ..executors.base import AsyncExecutor
from ..kernel_state.kernel_probe import (
    LIBRARY_PROBE_CODE,
    data_preview_expression,
    describe_libraries,
    parse_library_probe,
    parse_text_expression,
)
from ..kernel_state.preview_facts import split_facts
from ..prompts import prompt
from ..settings import Settings
from .lever import Lever
from .state import TaskState

__all__ = ["DataPreview", "probe_libraries", "system_prompt"]

_PROBE_TIMEOUT_S = 60.0


async def probe_libraries(executor: AsyncExecutor) -> tuple[dict[str, str], str]:
    """``({import name: version}, one line for the system prompt)``; empty if not Python."""
    if executor.language_info.get("name") != "python":
        return {}, ""
    try:
        result = await executor.execute(
            "", timeout=_PROBE_TIMEOUT_S, user_expressions={"libraries": LIBRARY_PROBE_CODE}
        )
    except Exception:  # a probe never fails a run
        return {}, ""
    found = parse_library_probe(result.user_expressions.get("libraries"))
    return found, describe_libraries(found) if found else ""


class DataPreview(Lever):
    """Each task starts with a preview of the files in the kernel's work dir (again only
    when they changed).

    Name and size of each; for tables the shape, the columns (quoted, with dtypes), the
    missing values and a few rows, within ``budget_chars``, read by pandas in the kernel.
    """

    name = "data_preview"

    def __init__(self, budget_chars: int = 3000) -> None:
        self.budget_chars = budget_chars
        self._shown: str | None = None  # the preview the model already has (chat sessions)

    async def task_note(self, state: TaskState, executor: AsyncExecutor) -> str | None:
        if executor.language_info.get("name") != "python":
            return None
        # rows of a wide table: only the columns the task names (fewer tokens to read)
        expression = data_preview_expression(
            budget_chars=self.budget_chars, focus=state.task, facts=True
        )
        try:
            result = await executor.execute(
                "", timeout=_PROBE_TIMEOUT_S, user_expressions={"preview": expression}
            )
        except Exception:
            return None
        text = parse_text_expression(result.user_expressions.get("preview"))
        if text is not None:
            text, state.data_facts = split_facts(text)
            text = text[: 2 * self.budget_chars]  # the kernel's answer: bounded again
        if text is None:
            return None
        if text.startswith("No files"):
            if state.namespace:
                return None  # the data may be the kernel's variables (%%agent, a session)
            # no-data tasks (dates, sequences, numeric methods): the bundled model otherwise
            # reads a `data.csv` of its own invention (the generic suite, 2026-11-27)
            text = prompt("no_files")
            shown, self._shown = self._shown, text
            return None if text == shown else text
        if all(line.endswith("/ (directory)") for line in text.splitlines()):
            return None  # nothing to preview: no files, or only folders
        if text == self._shown:
            return None  # a later task of the same session: the model has seen it
        self._shown = text
        header = "Files in the working directory (a preview; column names are exact"
        if "\n  ! " in text or "\n  read it with: " in text:
            header += "; read each file as shown, and fix what a line starting with ! says first"
        return header + "):\n" + text


def system_prompt(
    settings: Settings,
    executor: AsyncExecutor,
    protocol: str,
    libraries_note: str,
    host_section: str,
    cwd: str,
) -> str:
    """The system prompt: the kernel, how to run code (``protocol``), what it can import,
    the host tools; last the work dir ``cwd``."""
    language = executor.language_info.get("name", "python")
    how = prompt(f"run_{protocol}", language=language, fence_lang=language)
    vision = " and the image itself" if settings.vision else ""
    system = prompt(
        "system",
        language=language,
        kernel_display=executor.kernelspec.get("display_name", language),
        how_to_run=how,
        vision_note=vision,
        data_note=(
            prompt("data_note_python")
            if language == "python"
            else prompt("code_note_other", language=language)
        )
        + "\n",
    )
    if libraries_note:
        system += f"\n{libraries_note}"
    if host_section:
        system += f"\n\n{host_section}"
    # last: a sandboxed kernel's work dir is new each run, and everything before it is a
    # prefix a warm local model has already evaluated
    return f"{system}\n\n{prompt('workdir', cwd=cwd).strip()}"
