"""What a task asks of its answer's form, and the numbers an answer states: pure units.
(The levers that act on them: tests/agent/levers/test_states_result.py, test_answer_format.py.)"""

from __future__ import annotations

from kernel_agent.agent.answers import FormatSpec, format_problems, numbers_in


def test_numbers_are_read_as_written() -> None:
    assert numbers_in("mean 12.345, n=1,234 and -0.5e-3 (x2)") == ["12.345", "1234", "-0.5e-3"]


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
