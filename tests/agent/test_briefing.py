"""The system prompt's data idioms, as written there, run in a real kernel."""

from __future__ import annotations

import re

from kernel_agent.prompts import prompt


def test_the_data_idioms_run_and_give_the_values_they_promise(kernel):
    note = prompt("data_note_python")
    idioms = re.findall(r"`([^`]+)`", note)
    for needed in (
        "df.groupby('g')['x'].mean()",
        "stats.f_oneway(*[s for _, s in df.groupby('g')['x']])",
        "stats.chi2_contingency(pd.crosstab(df['a'], df['b']))",
        "r, p = stats.pearsonr(df['a'], df['b'])",
        "row = df.loc[df['x'].idxmax()]",
        "row['date']",
        "pd.to_datetime(dict(year=1973, month=df['Month'], day=df['Day']))",
        "df['d'].dt.to_period('M')",
        "df['year'] // 10 * 10",
        "df['group'] = pd.cut(df['x'], [0, 18, 60, np.inf], labels=['child', 'adult', 'senior'], right=False)",  # noqa: E501
    ):
        assert needed in idioms, needed
    code = "\n".join(
        [
            "import numpy as np, pandas as pd",
            "from scipy import stats",
            "df = pd.DataFrame({'g': list('aabb'), 'x': [1.0, 18.0, 60.0, 3.0],",
            "    'a': [1, 2, 3, 4], 'b': [2, 4, 5, 9], 'Month': [5, 8, 8, 9], 'Day': [1, 25, 26, 30],",
            "    'date': ['d1', 'd2', 'd3', 'd4'], 'year': [1969, 1970, 1985, 1999],",
            "    'd': ['1973-05-01', '1973-08-25', '1973-08-26', '1973-09-30']})",
            "print(df.groupby('g')['x'].mean().idxmax())",
            "print(round(stats.f_oneway(*[s for _, s in df.groupby('g')['x']]).pvalue, 4))",
            "print(stats.chi2_contingency(pd.crosstab(df['a'], df['b']))[2])",
            "r, p = stats.pearsonr(df['a'], df['b']); print(round(r, 4))",
            "row = df.loc[df['x'].idxmax()]; print(row['date'])",
            "print(pd.to_datetime(dict(year=1973, month=df['Month'], day=df['Day']))"
            ".dt.strftime('%Y-%m-%d').tolist())",
            "df['d'] = pd.to_datetime(df['d']); print(df['d'].dt.to_period('M').astype(str).tolist())",
            "print((df['year'] // 10 * 10).tolist())",
            "df['group'] = pd.cut(df['x'], [0, 18, 60, np.inf], labels=['child', 'adult', 'senior'],"
            " right=False)",
            "print(df['group'].astype(str).tolist())",
        ]
    )
    result = kernel.execute(code, timeout=60)
    assert result.ok, result.error
    printed = "".join(o.get("text", "") for o in result.outputs if o.get("name") == "stdout")
    assert printed.split("\n")[:-1] == [
        "b",
        "0.5365",  # one-way ANOVA by hand: F = 0.5536 on (1, 2) degrees of freedom
        "9",
        "0.9648",  # numpy's corrcoef
        "d3",
        "['1973-05-01', '1973-08-25', '1973-08-26', '1973-09-30']",
        "['1973-05', '1973-08', '1973-08', '1973-09']",
        "[1960, 1970, 1980, 1990]",
        "['child', 'adult', 'senior', 'child']",
    ], printed
