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


def test_the_idioms_told_to_a_task_without_files_give_the_right_values(kernel):
    """Each idiom of the no-files note, as written there, run in a real kernel against
    values known otherwise (pandas' business-day range, the error function)."""
    from kernel_agent.prompts import prompt

    note = prompt("no_files")
    idioms = [
        "d.strftime('%A')",
        "d.timetuple().tm_yday",
        "(d2 - d1).days + 1",
        "np.busday_count(d1, d2 + datetime.timedelta(days=1))",
        "scipy.integrate.quad(f, a, b)[0]",
        "scipy.optimize.brentq(f, a, b)",
        "scipy.optimize.minimize_scalar(f, bounds=(a, b), method='bounded')",
        "r = rate / 12; n = years * 12; p = loan * r / (1 - (1 + r) ** -n)",
        "p * n - loan",
        "amount * (1 + rate / k) ** (k * years)",
    ]
    for idiom in idioms:
        assert f"`{idiom}`" in note, idiom
    code = "\n".join(
        [
            "import datetime, math, numpy as np, pandas as pd, scipy.integrate, scipy.optimize",
            "d = datetime.date(2024, 12, 31)",
            f"print({idioms[0]}, {idioms[1]})",
            "d1, d2 = datetime.date(2025, 3, 1), datetime.date(2025, 6, 30)",
            f"print({idioms[2]}, {idioms[3]}, len(pd.bdate_range(d1, d2)))",
            "f = lambda x: np.exp(-x ** 2); a, b = 0, 2",
            f"print(round({idioms[4]}, 9), round(math.sqrt(math.pi) / 2 * math.erf(2), 9))",
            "f = lambda x: x ** 2 - 2; a, b = 0, 2",
            f"print(round({idioms[5]}, 9), round(math.sqrt(2), 9))",
            "f = lambda x: (x - 1.5) ** 2 + 3; a, b = 0, 4",
            f"m = {idioms[6]}; print(round(m.x, 4), round(m.fun, 4))",
            "loan, rate, years = 250_000, 0.0625, 30",
            f"{idioms[7]}; print(round(p, 2), round({idioms[8]}, 2))",
            "amount, rate, k, years = 1000, 0.05, 12, 10",
            f"print(round({idioms[9]}, 2))",
        ]
    )
    result = kernel.execute(code, timeout=60)
    assert result.ok, result.error
    printed = "".join(o.get("text", "") for o in result.outputs if o.get("name") == "stdout")
    assert printed.split("\n")[:-1] == [
        "Tuesday 366",
        "122 86 86",
        "0.882081391 0.882081391",
        "1.414213562 1.414213562",
        "1.5 3.0",
        "1539.29 304145.48",
        "1647.01",
    ], printed
