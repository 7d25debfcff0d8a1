"""Labels used as positions or as numbers: the hints, on a real kernel's errors and summary.

The failing cells are a churn question's (a scratch set, 2026-12-07); each hint's fix is
run on the same kernel and must give the right share.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kernel_agent.agent.hints import error_hint
from kernel_agent.agent.label_hints import (
    labelled_lookup,
    labels_averaged,
    quoted_number,
    years_as_columns,
)
from kernel_agent.kernel_state.namespace import NAMESPACE_EXPRESSION, VariableInfo, parse_summary
from kernel_agent.results import CellError, CellResult

pytestmark = pytest.mark.timeout(120)

NOW = datetime.now(timezone.utc)
TOLD = (
    "telco.csv (1 KB)\n  few distinct values: 'Contract' 'Month-to-month', 'One year'; "
    "'Churn' 'No', 'Yes'\n"
)
LOAD = (
    "import pandas as pd\n"
    "df = pd.DataFrame({'Contract': ['Month-to-month'] * 6 + ['One year'] * 4,\n"
    "                   'Churn': ['Yes', 'No', 'Yes', 'No', 'Yes', 'Yes', 'No', 'No', 'No', 'Yes']})\n"
    "m = df[df['Contract'] == 'Month-to-month']\n"
)


def failed(code: str, ename: str, evalue: str) -> CellResult:
    return CellResult(code, "error", 1, [], CellError(ename, evalue, []), NOW, NOW)


def ran(kernel, code: str) -> tuple[CellResult, dict[str, VariableInfo]]:
    result = kernel.execute(code, timeout=60)
    probe = kernel.execute("", timeout=30, user_expressions={"ns": NAMESPACE_EXPRESSION})
    namespace = parse_summary(probe.user_expressions.get("ns")) or {}
    return CellResult(code, result.status, 1, result.outputs, result.error, NOW, NOW), namespace


def stdout(result) -> str:
    return "".join(o.get("text", "") for o in result.outputs if o.get("name") == "stdout")


def test_a_position_on_value_counts_gets_the_label_or_iloc(kernel):
    code = LOAD + "share = m['Churn'].value_counts() / len(m) * 100\nprint(share[1])"
    result, namespace = ran(kernel, code)
    assert result.error is not None and result.error.ename == "KeyError"
    hint = error_hint(result, namespace)
    assert "`share[1]` looks up the label 1" in hint and "`share.iloc[1]`" in hint, hint
    fixed = kernel.execute("print(share['Yes'], share.iloc[0])", timeout=30)
    assert stdout(fixed) == f"{4 / 6 * 100} {4 / 6 * 100}\n"


def test_a_position_on_row_numbers_or_a_frame_keeps_the_other_hints(kernel):
    namespace = {"s": VariableInfo("s", "Series", row_numbers=True)}
    assert labelled_lookup("1", "print(s[1])", namespace) == ""
    frames = {"df": VariableInfo("df", "DataFrame", columns=("a",))}
    assert labelled_lookup("1", "print(df[1])", frames) == ""
    hint = error_hint(failed("print(df[1])", "KeyError", "1"), frames)
    assert "frame.iloc[1]" in hint


def test_a_mean_of_yes_and_no_gets_the_share_of_a_comparison(kernel):
    code = LOAD + "print(m['Churn'].mean() * 100)"
    result, namespace = ran(kernel, code)
    assert result.error is not None
    hint = error_hint(result, namespace, told=[TOLD])
    assert "'Churn' holds labels ('No', 'Yes')" in hint, (result.error, hint)
    fix = hint.split("`")[1].replace("df[", "m[")
    fixed = kernel.execute(f"print({fix} * 100)", timeout=30)
    assert stdout(fixed) == f"{4 / 6 * 100}\n"


def test_only_a_column_the_preview_listed_as_labels_is_named():
    assert labels_averaged("x = df['MonthlyCharges'].mean()", TOLD) == ""
    assert labels_averaged("x = df['Churn'].value_counts()", TOLD) == ""
    assert labels_averaged("x = df['Churn'].mean(", TOLD) == ""  # no code to read
    assert labels_averaged("x = df.Churn.sum()", TOLD).startswith("Hint: 'Churn' holds labels")
    assert labels_averaged("x = df['Churn'].mean()", "no preview") == ""
    quoted = "  few distinct values: 'it''s' 'a', 'b'; 'Churn' 'No', 'Yes'"
    assert "'Churn' holds labels" in labels_averaged("df['Churn'].std()", quoted)


def test_a_quoted_number_on_a_headerless_read_says_to_drop_the_quotes(kernel):
    code = (
        "import io\nimport pandas as pd\n"
        "df = pd.read_csv(io.StringIO('5.1,1.4,a\\n4.9,1.3,b\\n'), header=None)\n"
        "print(df['1'].mean())"
    )
    result, namespace = ran(kernel, code)
    assert result.error is not None and result.error.evalue == "'1'", result.error
    hint = error_hint(result, namespace)
    assert "write df[1], without quotes" in hint, hint
    fixed = kernel.execute("print(df[1].mean())", timeout=30)
    assert stdout(fixed) == f"{(1.4 + 1.3) / 2}\n"
    named = {"df": VariableInfo("df", "DataFrame", columns=("a", "b"))}
    assert quoted_number("'1'", named) == "" and quoted_number("1", namespace) == ""


def test_a_hostile_preview_line_is_read_in_bounded_time_and_quoted_short():
    """The "few distinct values" line is kernel text: 64 K characters of it, shaped to make
    a regex backtrack, are read at once and no more than five values reach the hint."""
    import time

    many_lines = ("few distinct values: 'a' '" + "\\'" * 1000 + "\n") * 60
    for told in (
        many_lines,
        "few distinct values: " + "'c' " * 8000 + "'a', " * 8000 + "x",
        "few distinct values: 'a' " + "'" + "\\'" * 30000,
        "few distinct values: 'a' " + "'v', " * 13000,
    ):
        start = time.monotonic()
        hint = labels_averaged("df['a'].mean()", told[:65536])
        assert time.monotonic() - start < 2.0
        assert len(hint) < 600, len(hint)


def test_a_year_column_asked_of_a_wide_table_gets_the_years_as_columns(kernel):
    code = (
        "import pandas as pd\n"
        "wb = pd.DataFrame({'Country Name': ['A', 'B', 'C'], '1990': [60e6, 2e6, 51e6],\n"
        "                   '2000': [70e6, 3e6, 49e6], '2020': [80e6, 4e6, 55e6]})\n"
        "print(len(wb[(wb['Year'] == 1990) & (wb['Value'] > 50e6)]))"
    )
    result, namespace = ran(kernel, code)
    assert result.error is not None and result.error.ename == "KeyError"
    hint = error_hint(result, namespace)
    assert "wb is wide, one column per year ('1990' ... '2020'" in hint, hint
    assert "one row per 'Country Name'" in hint and "wb[wb['2020'] > x]" in hint
    fixed = kernel.execute("print(len(wb[wb['1990'] > 50e6]))", timeout=30)
    assert stdout(fixed) == "2\n"
    # a name that is no year, or a frame without year columns: the usual hints
    assert years_as_columns("Country", namespace) == ""
    assert years_as_columns("Year", {"d": VariableInfo("d", "DataFrame", columns=("a",))}) == ""
