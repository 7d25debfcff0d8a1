"""KernelState on a real kernel: the one path that runs, records, rebuilds and shows a cell."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_agent.events import CellFinished, CellOutput, StateRebuilt
from kernel_agent.executors.factory import make_executor
from kernel_agent.kernel_state import CellRecord, KernelState
from kernel_agent.kernel_state.namespace import COUNTED_CELLS
from kernel_agent.notebook import cellmeta as M
from kernel_agent.notebook.clean import clean_notebook
from kernel_agent.notebook.transcript import Transcript
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(120)


def _with_state(tmp_path: Path, body: Callable[[KernelState], Awaitable[Any]], **kw: Any) -> Any:
    settings = Settings.from_env(env={}, cwd=tmp_path, sandbox="none", **kw)

    async def go() -> Any:
        executor = make_executor(settings)
        await executor.start()
        try:
            transcript = Transcript(
                tmp_path / "t.ipynb",
                kernelspec=executor.kernelspec,
                language_info=executor.language_info,
            )
            return await body(KernelState(executor, transcript, settings))
        finally:
            await executor.shutdown()

    return asyncio.run(go())


async def _run(state: KernelState, code: str, **kw: Any) -> tuple[CellRecord, list[Any]]:
    events, record = [], None
    async for item in state.run(code, **kw):
        if isinstance(item, CellRecord):
            record = item
        else:
            events.append(item)
    assert record is not None
    return record, events


def _code_meta(path: Path) -> list[dict[str, Any]]:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return [M.cell_meta(c) for c in nb.cells if c.cell_type == "code"]


def test_a_cell_is_recorded_with_one_record_and_its_namespace_change(tmp_path: Path) -> None:
    seen: list[Any] = []

    def annotate(result: Any, summary: Any) -> dict[str, Any]:
        seen.append((result.status, sorted(summary or {})))
        return {"mine": 1}

    async def body(state: KernelState) -> Any:
        ok, events = await _run(
            state, "x = 41 + 1\nprint(x)", step=3, meta={"source": "test"}, annotate=annotate
        )
        err, _ = await _run(state, "y = [1, 2]\n1/0")
        return ok, events, err, state

    ok, events, err, state = _with_state(tmp_path, body)
    kinds = [type(e) for e in events]
    assert kinds == [CellOutput, CellFinished] and events[0].output["text"] == "42\n"
    assert events[1].step == 3 and events[1].result is ok.result
    assert ok.change == "new: x (int = 42)" and ok.index == 0
    # the probe is asked again after an error: the model still learns what the cell made
    assert err.result.status == "error" and "y (list, len 2)" in err.change
    assert seen == [("ok", ["x"])]
    assert state.state_cells == [("x = 41 + 1\nprint(x)", ok.result.duration)]
    first, second = _code_meta(tmp_path / "t.ipynb")
    assert first[M.STATUS] == "ok" and first["source"] == "test" and first["mine"] == 1
    assert first[M.STEP] == 3 and first[M.RESTARTED] is False and first[M.EXEC_S] >= 0
    assert first[M.STARTED] < first[M.ENDED]
    assert second[M.STATUS] == "error"


def _namespace_after(tmp_path: Path, code: str) -> Any:
    """The namespace summary the kernel reports after running ``code``."""

    async def body(state: KernelState) -> Any:
        await _run(state, code)
        return state.namespace

    return _with_state(tmp_path, body)


def test_the_namespace_says_which_index_is_row_numbers(tmp_path: Path) -> None:
    """What RowLabelCheck reads: a CSV's frame and a series of it are row-numbered;
    a frame indexed by a key, a grouped series and a date index are not."""
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'state': ['a', 'b'], 'x': [1.0, 2.0]})\n"
        "col = df['x']\n"
        "sub = df[df['x'] > 1]\n"
        "keyed = df.set_index('state')\n"
        "means = df.groupby('state')['x'].mean()\n"
        "days = pd.Series([1, 2], index=pd.to_datetime(['2024-01-01', '2024-01-02']))\n"
        "items = [3, 1]"
    )

    ns = _namespace_after(tmp_path, code)
    numbered = {name for name, info in ns.items() if info.row_numbers}
    assert numbered == {"df", "col", "sub"}


def test_the_namespace_counts_the_values_that_are_not_missing(tmp_path: Path) -> None:
    """What every_row reads: a frame's non-missing values per listed column (the first
    20), a series' in all; nothing for what has no values to count, or past the cells a
    summary reads for them (it runs after every cell)."""
    code = (
        "import numpy as np, pandas as pd\n"
        "df = pd.DataFrame({'pulse': [70.0, np.nan, 80.0], 'sex': ['F', None, None]})\n"
        "col = df['pulse']\n"
        "wide = pd.DataFrame(np.ones((2, 30)))\n"
        "n = 3\n"
        "huge = pd.DataFrame(np.ones((COUNTED_CELLS // 20 + 1, 20)))"
    ).replace("COUNTED_CELLS", str(COUNTED_CELLS))

    ns = _namespace_after(tmp_path, code)
    assert ns["df"].counts == (2, 1) and ns["col"].counts == (2,)
    assert ns["wide"].counts == (2,) * 20 and ns["n"].counts is None
    assert ns["huge"].shape is not None and ns["huge"].counts is None  # past the budget


def test_the_models_view_has_one_format(tmp_path: Path) -> None:
    async def body(state: KernelState) -> Any:
        record, _ = await _run(state, "z = 'hi'\nprint(z)")
        return state.view(record, hint="Hint: none needed.", vision=False)

    view = _with_state(tmp_path, body)
    assert view.text.startswith("Output of cell [1] (ok):\nhi\n")
    assert view.text.endswith("Hint: none needed.\nVariables new: z (str, len 2 = 'hi')")
    assert view.images == []


def test_a_dead_kernel_is_rebuilt_from_the_state_cells(tmp_path: Path) -> None:
    async def body(state: KernelState) -> Any:
        await _run(state, "import os\nkeep = 'yes'")
        await _run(state, "broken = 1/0")  # failed: not part of the state
        died, events = await _run(state, "os.kill(os.getpid(), 9)")
        after, _ = await _run(state, "print(keep)")
        return died, events, after, state

    died, events, after, state = _with_state(tmp_path, body, rebuild_max_cell_s=5.0)
    assert died.result.status == "died" and died.result.restarted
    rebuilt = [e for e in events if isinstance(e, StateRebuilt)]
    assert len(rebuilt) == 1 and rebuilt[0].replayed == 1
    assert "survived: keep" in died.note and "Gone: none" in died.note
    assert died.note in "\n".join(
        line for line in state.view(died).text.splitlines() if "rebuilt" in line
    )
    assert after.result.outputs[0]["text"] == "yes\n"
    meta = _code_meta(tmp_path / "t.ipynb")
    assert [(m[M.STATUS], bool(m.get(M.REPLAY))) for m in meta] == [
        ("ok", False), ("error", False), ("died", False), ("ok", True), ("ok", False),
    ]  # fmt: skip
    # the clean notebook reads the same names: the replay stands for the wiped cell
    clean = clean_notebook(nbformat.read(tmp_path / "t.ipynb", as_version=4))
    assert [c.source for c in clean.cells] == ["import os\nkeep = 'yes'", "print(keep)"]


def test_restart_marks_the_notebook_and_replays_only_when_asked(tmp_path: Path) -> None:
    async def body(state: KernelState) -> Any:
        await _run(state, "a = 1")
        kept = await state.restart(provenance={"source": "test"})
        lost = await state.restart(rebuild=False)
        probe, _ = await _run(state, "print('a' in dir())")
        return kept, lost, probe

    kept, lost, probe = _with_state(tmp_path, body)
    assert "survived: a" in kept and "every variable and import is gone (a)" in lost
    assert probe.result.outputs[0]["text"] == "False\n"
    meta = _code_meta(tmp_path / "t.ipynb")
    markers = [m for m in meta if m[M.STATUS] == M.RESTART]
    assert len(markers) == 2 and markers[0]["source"] == "test" and markers[0][M.RESTARTED]
    nb = nbformat.read(tmp_path / "t.ipynb", as_version=4)
    notes = [c for c in nb.cells if M.cell_meta(c).get(M.ROLE) == M.ROLE_NOTE]
    assert len(notes) == 2


def test_a_cancelled_cell_is_marked_interrupted_and_the_kernel_lives_on(tmp_path: Path) -> None:
    async def body(state: KernelState) -> Any:
        await _run(state, "n = 5")
        task = asyncio.ensure_future(_run(state, "import time\ntime.sleep(30)"))
        for _ in range(100):  # its code is on disk while it runs
            await asyncio.sleep(0.05)
            if "time.sleep(30)" in (tmp_path / "t.ipynb").read_text():
                break
        running = _code_meta(tmp_path / "t.ipynb")[-1][M.STATUS]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after, _ = await _run(state, "print(n)")
        return running, after

    running, after = _with_state(tmp_path, body)
    assert running == M.RUNNING
    assert after.result.outputs[0]["text"] == "5\n"  # interrupted, not restarted
    assert [m[M.STATUS] for m in _code_meta(tmp_path / "t.ipynb")] == [
        "ok", M.INTERRUPTED, "ok",
    ]  # fmt: skip


def test_notes_and_skipped_cells_carry_their_role_and_status(tmp_path: Path) -> None:
    async def body(state: KernelState) -> Any:
        state.note("**Task:** t", M.ROLE_TASK)
        state.skipped("rm -rf /", **{M.STEP: 1, M.LEVER: "test"})
        state.note("done", M.ROLE_ANSWER)
        return state.write_clean()

    clean_path = _with_state(tmp_path, body)
    nb = nbformat.read(tmp_path / "t.ipynb", as_version=4)
    assert [M.cell_meta(c).get(M.ROLE) or M.cell_meta(c)[M.STATUS] for c in nb.cells] == [
        "task", "skipped", "answer",
    ]  # fmt: skip
    clean = nbformat.read(clean_path, as_version=4)
    assert [c.source for c in clean.cells] == ["**Task:** t", "done"]


def test_the_agent_and_a_session_record_the_same_cells_alike(tmp_path: Path, fake_llm: Any) -> None:
    # one path records a cell: what the agent ran and what a front end sent (MCP and HTTP
    # both call Session.run_cell) come out with the same outputs and the same record keys
    from fake_openai import run_cell, scripted_settings, text

    from kernel_agent.agent import AsyncAgent
    from kernel_agent.session import Session

    cells = ["a = 6 * 7\nprint(a)", "1/0", "b = [a] * 2\nb"]
    fake_llm.enqueue(*[run_cell(c) for c in cells], text("a is 42 and b is [42, 42]."))
    settings = scripted_settings(fake_llm, tmp_path, levers="none", clean_notebook=False)

    async def go() -> tuple[Path, Path]:
        async with AsyncAgent(settings, notebook=tmp_path / "agent.ipynb") as agent:
            async for _ in agent.run("compute"):
                pass
        async with Session(settings, notebook=tmp_path / "session.ipynb") as session:
            for code in cells:
                await session.run_cell(code)
        return tmp_path / "agent.ipynb", tmp_path / "session.ipynb"

    by_agent, by_session = asyncio.run(go())
    common = {M.STATUS, M.RESTARTED, M.STARTED, M.ENDED, M.EXEC_S}

    def code_cells(path: Path) -> list[tuple[str, Any, str, bool]]:
        nb = nbformat.read(path, as_version=4)
        out = []
        for cell in nb.cells:
            if cell.cell_type == "code":
                meta = M.cell_meta(cell)
                assert common <= set(meta), sorted(meta)
                outputs = [{k: v for k, v in o.items() if k != "traceback"} for o in cell.outputs]
                out.append((cell.source, outputs, meta[M.STATUS], meta[M.RESTARTED]))
        return out

    assert code_cells(by_agent) == code_cells(by_session)
    assert [c[2] for c in code_cells(by_agent)] == ["ok", "error", "ok"]
