"""explode_hints: an exploded Series put back as a column (pure, on pandas' own error and
the code the hint suggests, run)."""

from __future__ import annotations

import pandas as pd
import pytest

from kernel_agent.agent.explode_hints import reindexed_hint

DF = pd.DataFrame({"listed_in": ["Dramas, Comedies", "Dramas", "Horror, Dramas, Comedies"]})
CODE = "df['listed_in'] = df['listed_in'].str.split(',').explode().str.strip()"


def error_of(code: str) -> str:
    df = DF.copy()
    with pytest.raises(ValueError) as raised:
        exec(code, {"df": df, "pd": pd})
    return str(raised.value)


def test_the_hint_names_the_put_back_and_its_two_ways_out_which_work():
    hint = reindexed_hint(error_of(CODE), CODE)
    assert "cannot be put back as df['listed_in']" in hint
    ways = [part.split("`")[1] for part in hint.split("Keep it in a name of its own: ")[1:]]
    space = {"df": DF.copy(), "pd": pd}
    exec(ways[0], space)
    assert space["values"].value_counts().to_dict() == {"Dramas": 3, "Comedies": 2, "Horror": 1}
    space = {"df": DF.copy(), "pd": pd}
    exec("df['listed_in'] = df['listed_in'].str.split(',')\ndf = df.explode('listed_in')", space)
    assert len(space["df"]) == 6 and "df = df.explode('listed_in')" in hint


def test_another_duplicate_label_refusal_gets_the_general_hint():
    code = "s = pd.Series([1, 2], index=[0, 0])\ndf['n'] = s"
    hint = reindexed_hint(error_of(code), code)
    assert "repeated index labels" in hint and "explode()" not in hint


@pytest.mark.parametrize("evalue", ["could not convert string to float: 'x'", ""])
def test_other_errors_get_nothing(evalue):
    assert reindexed_hint(evalue, CODE) == ""
