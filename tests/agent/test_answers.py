"""The final-answer levers, without a kernel or a server: the answer states the values, and
follows the format the task asks for."""

from __future__ import annotations

from datetime import datetime, timezone

from nbformat.v4 import new_output

from kernel_agent.agent.answers import FormatSpec, format_problems, numbers_in
from kernel_agent.agent.levers.answer_format import AnswerFormat
from kernel_agent.agent.levers.states_result import StatesResult
from kernel_agent.agent.state import TaskState
from kernel_agent.results import CellResult

NOW = datetime.now(timezone.utc)


def ok(code: str, printed: str = "") -> CellResult:
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def test_numbers_are_read_as_written() -> None:
    assert numbers_in("mean 12.345, n=1,234 and -0.5e-3 (x2)") == ["12.345", "1234", "-0.5e-3"]


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


def test_format_spec_reads_slots_rounding_and_yes_no() -> None:
    spec = FormatSpec.of(
        "Compute the mean price. Round to two decimal places. "
        "@mean_price[mean], @max_price[max]. Is it above 10 (yes/no)?"
    )
    assert spec.slots == ("mean_price", "max_price") and spec.decimals == 2 and spec.yes_no
    assert spec.template() == "@mean_price[value] @max_price[value]"
    assert FormatSpec.of("to 3 decimal places").decimals == 3
    assert FormatSpec.of("rounded to the nearest integer").decimals == 0
    two = FormatSpec.of("U rounded to 1 decimal place and the p-value to 4 decimal places")
    assert two.decimals == 4  # seen: a right "@u[36671.5] @p[0.5372]" was sent back for 1
    assert format_problems(two, "@u[36671.5] @p[0.5372]") == []
    assert FormatSpec.of("What is the mean?").empty


def test_format_problems_name_what_is_off() -> None:
    spec = FormatSpec.of("@mean_price[mean] @n[count], rounded to 2 decimal places (yes/no)")
    assert format_problems(spec, "@mean_price[12.35] @n[40] yes") == []
    problems = format_problems(spec, "The mean price is 12.3456, n is 40.")
    assert problems == [
        "it lacks @mean_price[...], @n[...]",
        "12.3456 not rounded to 2 decimal places",
        "it does not say yes or no",
    ]
    assert format_problems(spec, "@mean_price[value] @n[] no") == [
        "a @name[...] slot holds no value"
    ]
    dabench = FormatSpec.of("@mean_fare[mean_fare_value] where it is rounded to two decimal places")
    assert format_problems(dabench, "@mean_fare[mean_fare_value]") == [
        "a @name[...] slot holds no value"
    ]
    assert format_problems(dabench, "@mean_fare[34.65]") == []
    dated = FormatSpec.of("round to 1 decimal place")
    assert format_problems(dated, "On 2024-01-05 at 10:30 it was 3.2") == []


def test_answer_format_asks_once_with_the_template() -> None:
    st = TaskState("Find the mean. @mean_price[value], rounded to 2 decimal places.")
    lever = AnswerFormat()
    ask = lever.on_answer(st, "The mean price is 12.3456.")
    assert ask is not None and "@mean_price[value]" in ask.message and "12.3456" in ask.message
    assert lever.on_answer(st, "still 12.3456") is None
    assert AnswerFormat().on_answer(TaskState("What is the mean?"), "12.3456") is None


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
