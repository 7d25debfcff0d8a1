"""The slots a task asks for, and the numbers an answer states: pure units.
(The levers that act on them: tests/agent/levers/test_states_result.py, test_printed_answer.py.)"""

from __future__ import annotations

from kernel_agent.agent.answers import FormatSpec, decimal_places, numbers_in


def test_numbers_are_read_as_written() -> None:
    assert numbers_in("mean 12.345, n=1,234 and -0.5e-3 (x2)") == ["12.345", "1234", "-0.5e-3"]
    assert [decimal_places(n) for n in ("12.345", "40", "1.50e3")] == [3, 0, 2]


def test_format_spec_reads_the_slots_and_their_placeholders() -> None:
    spec = FormatSpec.of(
        "Compute the mean price. @mean_price[mean], @max_price[max], @mean_price[x]."
    )
    assert spec.slots == ("mean_price", "max_price")
    assert spec.placeholders == {"mean", "max", "x"}
    assert FormatSpec.of("What is the mean?").slots == ()
