"""The levers against spinning, without a kernel or a server: repeated cells and outputs,
installs in a kernel that cannot install, prose in a code fence, and the honest stop."""

from __future__ import annotations

from datetime import datetime, timezone

from nbformat.v4 import new_output

from kernel_agent.agent.levers.no_install import NoInstall
from kernel_agent.agent.levers.prose_cell import ProseCell, looks_like_prose
from kernel_agent.agent.levers.stall_guard import STALL_LIMIT, StallGuard
from kernel_agent.agent.state import Ask, Stop, TaskState
from kernel_agent.results import CellResult

NOW = datetime.now(timezone.utc)


def ok(code: str, printed: str = "") -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def ran(st: TaskState, lever: StallGuard, cell: CellResult) -> Ask | Stop | None:
    decision = lever.before_cell(st, cell.code)
    if decision is None:
        st.cells.append(cell)
        lever.after_cell(st, cell, "")
    return decision


def test_a_repeated_successful_cell_is_not_run_and_shows_its_output() -> None:
    st, guard = TaskState("t"), StallGuard()
    assert ran(st, guard, ok("print(6 * 7)", "42\n")) is None
    again = guard.before_cell(st, "print(6 * 7)\n\n")
    assert isinstance(again, Ask) and "42" in again.message and not again.failure
    assert st.stalls == 1 and again.cell_meta == {"repeat": True}


def test_two_stalls_ask_once_for_the_answer_then_the_run_ends_honestly() -> None:
    st, guard = TaskState("t"), StallGuard()
    ran(st, guard, ok("print(6 * 7)", "42\n"))
    guard.before_cell(st, "print(6 * 7)")  # stall 1: told it already ran
    ask = guard.before_cell(st, "print(6 * 7)")  # stall 2: asked for the final answer
    assert isinstance(ask, Ask) and "final answer" in ask.message and "42" in ask.message
    assert st.stalls == STALL_LIMIT
    stop = guard.before_cell(st, "print(6 * 7)")
    assert isinstance(stop, Stop) and stop.status == "no_answer"
    assert "No final answer" in stop.answer and "42" in stop.answer


def test_new_output_is_progress_and_a_repeated_output_is_not() -> None:
    st, guard = TaskState("t"), StallGuard()
    ran(st, guard, ok("print(1)", "1\n"))
    ran(st, guard, ok("x = 1; print(x)", "1\n"))
    assert st.stalls == 1
    ran(st, guard, ok("print(2)", "2\n"))
    assert st.stalls == 0
    ran(st, guard, ok("y = 5", ""))  # a cell that prints nothing is not a repeat
    assert st.stalls == 0


def test_after_the_ask_a_cell_with_new_output_may_still_run() -> None:
    st, guard = TaskState("t"), StallGuard()
    ran(st, guard, ok("print(1)", "1\n"))
    guard.before_cell(st, "print(1)")
    assert isinstance(guard.before_cell(st, "print(1)"), Ask)
    assert ran(st, guard, ok("print(3)", "3\n")) is None and st.stalls == 0


def test_installs_are_refused_naming_what_is_installed() -> None:
    st = TaskState("t", libraries={"pandas": "2.2", "scipy": "1.14"})
    lever = NoInstall()
    for code in (
        "!pip install sympy",
        "%pip install -q sympy",
        "import subprocess\nsubprocess.run(['pip', 'install', 'sympy'])",
        "!apt-get install -y r-base",
        "x = 1\n!pip3 install polars",
    ):
        ask = lever.before_cell(st, code)
        assert isinstance(ask, Ask) and "pandas, scipy" in ask.message, code
        assert not ask.failure
    assert st.stalls == 5
    for code in ("import pandas as pd", "print('pip install is not possible')", "!ls"):
        assert lever.before_cell(st, code) is None, code


def test_prose_in_a_code_fence_is_asked_for_as_the_answer() -> None:
    assert looks_like_prose("The mean price is 12.5 and the median is 11.")
    assert looks_like_prose("Therefore the answer is 42.\nThe output matches the result.")
    assert not looks_like_prose("print('The mean is', 12.5)")
    assert not looks_like_prose("df = pd.read_csv('a.csv')\ndf.head(")  # broken code, not prose
    assert not looks_like_prose("!ls data files here please")
    assert not looks_like_prose("Answer: 42")  # valid Python (an annotation)
    # an answer in @name[value] slots written as a cell (a SyntaxError when run), seen in the eval
    assert looks_like_prose("@mean[2.50]\n@pvalue[0.14]\n@significant[False]")
    assert looks_like_prose("@a[1], @b[x y]")
    assert not looks_like_prose("@decorator\ndef f(): pass")
    # the model's view of a cell sent back as a cell (engel-iqr on the real-data tuned half)
    echoed = "# Output of cell [1] (ok):\nNumber of outliers: 11\nMedian foodexp: 582.54"
    assert looks_like_prose(echoed)
    assert looks_like_prose("Output of cell [2] (error):\n  Cell In[2], line 2\n    x y\n")
    assert not looks_like_prose("# Output of cell [1] (ok): the count\nprint(len(df))")  # code
    after_an_import = (  # seen: the model echoed a cell's output under an import it was told of
        "# Import numpy as np (already added)\nimport numpy as np\n\n"
        "# Output of cell [1] (ok):\nNumber of adults: 218\nNumber of children: 40\n"
    )
    assert looks_like_prose(after_an_import)
    st, lever = TaskState("t"), ProseCell()
    assert lever.before_cell(st, "The answer is 42 as computed.") is None, "no cell ran yet"
    st.cells.append(ok("print(42)", "42\n"))
    ask = lever.before_cell(st, "The answer is 42 as computed.")
    assert isinstance(ask, Ask) and "The answer is 42" in ask.message and st.stalls == 1


def test_under_an_install_policy_the_model_is_pointed_at_install_package() -> None:
    ask = NoInstall("allow:sympy").before_cell(TaskState("t"), "!pip install sympy")
    assert isinstance(ask, Ask) and 'install_package("name")' in ask.message
    assert "allow:sympy" in ask.message
