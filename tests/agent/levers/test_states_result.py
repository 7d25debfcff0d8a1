"""states_result: an answer that states none of the printed values goes back once."""

from __future__ import annotations

from lever_cells import NOW, ok
from nbformat.v4 import new_output

from kernel_agent.agent.levers.states_result import StatesResult
from kernel_agent.agent.state import TaskState
from kernel_agent.results import CellResult


def test_an_answer_naming_a_variable_goes_back_once_with_the_output() -> None:
    st = TaskState(
        "What is the determinant?",
        cells=[ok("determinant = np.linalg.det(m)\nprint(determinant)", "-2.0\n")],
    )
    lever = StatesResult()
    ask = lever.on_answer(st, "We can use the determinant variable as the final answer.")
    assert ask is not None and "-2.0" in ask.message
    assert lever.on_answer(st, "Still the determinant.") is None, "once per task"


def test_an_answer_leaving_out_the_printed_number_goes_back() -> None:
    task = "Compute the mean."
    st = TaskState(task, cells=[ok("print(round(m, 2))", "12.35\n")])
    assert StatesResult().on_answer(st, "The mean is about 7.") is not None
    for fine in ("The mean is 12.35.", "The mean is 12.3.", "It is 12.35 (n=3)."):
        assert StatesResult().on_answer(TaskState(task, cells=st.cells), fine) is None, fine
    assert (
        StatesResult().on_answer(TaskState("Save it to a file.", cells=st.cells), "Saved.") is None
    )


def test_a_word_answer_from_the_output_is_accepted() -> None:
    task = "Which city has the maximum sales?"
    cells = [ok("print(s.idxmax(), s.max())", "Berlin 1234.5\n")]
    assert StatesResult().on_answer(TaskState(task, cells=cells), "Berlin has the most.") is None
    many = [ok("print(df.describe())", "1 2 3 4 5 6 7 8\n")]
    assert StatesResult().on_answer(TaskState(task, cells=many), "See 3.") is None
    assert StatesResult().on_answer(TaskState(task), "no cells") is None


def test_an_image_note_or_figure_repr_is_no_printed_value() -> None:
    plot = CellResult(
        "plt.plot([1, 2]); plt.show()",
        "ok",
        1,
        [
            new_output(
                "display_data",
                data={
                    "image/png": "iVBORw0KGgo=",
                    "text/plain": "<Figure size 640x480 with 1 Axes>",
                },
            ),
        ],
        None,
        NOW,
        NOW,
    )
    assert StatesResult().on_answer(TaskState("Plot the mean.", cells=[plot]), "plotted") is None


def test_an_answer_stating_an_earlier_cells_value_is_kept() -> None:
    """Issue 22: "15! is 1307674368000." was sent back because the *last* cell printed
    unrelated numbers (``key: None``, ``n = 6``)."""
    cells = [
        ok("f = math.factorial(15)\nprint(f)", "1307674368000\n"),
        ok("print('key:', d.get('key'))\nprint('n =', len(d))", "key: None\nn = 6\n"),
    ]
    task = "What is 15! (15 factorial)?"
    assert StatesResult().on_answer(TaskState(task, cells=cells), "15! is 1307674368000.") is None
    # an answer restating only the task's own number still goes back, with the last output
    ask = StatesResult().on_answer(TaskState(task, cells=cells), "15! is a large number.")
    assert ask is not None and "n = 6" in ask.message
    wrong = StatesResult().on_answer(TaskState(task, cells=cells), "15! is 42.")
    assert wrong is not None


def test_an_answer_leaving_out_an_asked_part_goes_back_with_the_parts() -> None:
    task = "Which country had the largest population in 2020, and what was it?"
    cells = [ok("print(df.loc[df['2020'].idxmax(), 'Country Name'])", "China\n")]
    lever = StatesResult()
    ask = lever.on_answer(TaskState(task, cells=cells), "Yes")
    assert ask is not None and "- what was it" in ask.message and "China" in ask.message
    assert lever.on_answer(TaskState(task, cells=cells), "Yes") is None, "once per task"
    done = [ok("print(name, pop)", "China 1402112000\n")]
    stated = "China, with 1402112000 people."
    assert StatesResult().on_answer(TaskState(task, cells=done), stated) is None
