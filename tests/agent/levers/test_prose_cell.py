"""prose_cell: prose in a code fence is asked for as the answer, and counts as a stall."""

from __future__ import annotations

from lever_cells import ok

from kernel_agent.agent.levers.prose_cell import ProseCell, looks_like_prose
from kernel_agent.agent.levers.stall_guard import StallGuard
from kernel_agent.agent.state import Ask, Stop, TaskState
from kernel_agent.results import CellResult


def ran(st: TaskState, lever: StallGuard, cell: CellResult) -> Ask | Stop | None:
    decision = lever.before_cell(st, cell.code)
    if decision is None:
        st.cells.append(cell)
        lever.after_cell(st, cell, "")
    return decision


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
    # a printed value sent back as a cell (a scratch churn question, 2026-12-07)
    for printed in ("46.0%", "$1,234.50", "12 kg\n3.5 %", "-0.25%"):
        assert looks_like_prose(printed), printed
    for code in ("46.0", "1_000", "x%", "46.0 % 3"):  # Python, or not a value alone
        assert not looks_like_prose(code), code
    st, lever = TaskState("t"), ProseCell()
    assert lever.before_cell(st, "The answer is 42 as computed.") is None, "no cell ran yet"
    st.cells.append(ok("print(42)", "42\n"))
    ask = lever.before_cell(st, "The answer is 42 as computed.")
    assert isinstance(ask, Ask) and "The answer is 42" in ask.message and st.stalls == 1
