"""data_preview: what a task is told of the work dir's files."""

from __future__ import annotations

import asyncio

from kernel_agent.agent.levers.data_preview import DataPreview
from kernel_agent.agent.state import TaskState
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.testing import FakeExecutor


def test_an_empty_work_dir_beside_variables_is_not_said_to_hold_no_data():
    """In `%%agent` or a session the data may be the kernel's variables, not a file."""

    class NoFiles(FakeExecutor):
        async def execute(self, code, timeout=None, on_output=None, user_expressions=None):
            result = await super().execute(code, timeout, on_output, user_expressions)
            text = repr("No files in the work dir.")
            result.user_expressions = {"preview": {"status": "ok", "data": {"text/plain": text}}}
            return result

    async def note(namespace):
        executor = NoFiles()
        await executor.start()
        state = TaskState("sum the sales")
        state.namespace = namespace
        return await DataPreview().task_note(state, executor)

    assert "no data file comes with this task" in asyncio.run(note({}))
    assert asyncio.run(note({"sales": VariableInfo(name="sales", type="list")})) is None


def test_the_preview_is_remembered_across_the_tasks_of_a_session() -> None:
    """Its memory (the preview the model has) is the session's, not one task's."""
    lever = DataPreview()
    assert lever.for_task() is lever
