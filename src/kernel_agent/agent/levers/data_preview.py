"""``data_preview``: each task starts with a preview of the files in the kernel's work dir.

Asked of the kernel as a ``user_expression`` beside an empty cell (no execution count,
nothing in the clean notebook); what it measured goes to ``TaskState.data_facts``, which
``preflight`` reads. Its memory (the preview the model has) lasts the agent's session, not
one task: a later task of the same session is not shown the same preview again.
"""

from __future__ import annotations

from ...executors.base import AsyncExecutor
from ...kernel_state.kernel_probe import data_preview_expression, parse_text_expression
from ...kernel_state.preview_facts import split_facts
from ...prompts import prompt
from ..briefing import PROBE_TIMEOUT_S
from ..state import TaskState
from .base import Lever

__all__ = ["DataPreview"]


class DataPreview(Lever):
    """Each task starts with a preview of the files in the kernel's work dir (again only
    when they changed).

    Name and size of each; for tables the shape, the columns (quoted, with dtypes), the
    missing values and a few rows, within ``budget_chars``, read by pandas in the kernel.
    """

    name = "data_preview"

    def __init__(self, budget_chars: int = 3000) -> None:
        super().__init__()
        self.budget_chars = budget_chars
        self._shown: str | None = None  # the preview the model already has (chat sessions)

    def for_task(self) -> DataPreview:
        """The same lever: what it showed is remembered across a session's tasks."""
        return self

    async def task_note(self, state: TaskState, executor: AsyncExecutor) -> str | None:
        if executor.language_info.get("name") != "python":
            return None
        # rows of a wide table: only the columns the task names (fewer tokens to read)
        expression = data_preview_expression(
            budget_chars=self.budget_chars, focus=state.task, facts=True
        )
        try:
            result = await executor.execute(
                "", timeout=PROBE_TIMEOUT_S, user_expressions={"preview": expression}
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
