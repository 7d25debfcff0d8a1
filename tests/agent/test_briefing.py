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


def test_two_sandboxed_runs_of_one_task_send_the_model_the_same_words(fake_llm, tmp_path):
    """At temperature 0 the same question on the same file gets the same answer: nothing
    that differs between runs (a sandbox room's path, new each kernel) is in the prompts."""
    from fake_openai import run_cell, scripted_settings, text

    from kernel_agent.agent import Agent

    code = "import pandas as pd\nprint(pd.read_csv('data.csv')['x'].mean())"
    sent = []
    for n in (1, 2):
        work = tmp_path / f"user{n}"
        work.mkdir()
        (work / "data.csv").write_text("x\n1\n2\n6\n")
        fake_llm.enqueue(run_cell(code), text("The mean is 3.0."))
        before = len(fake_llm.requests)
        settings = scripted_settings(fake_llm, work, sandbox="bwrap")
        with Agent(settings) as agent:
            result = agent.run_to_end("What is the mean of x in data.csv?")
            room = str(agent.aio.executor.kernel_cwd)
        assert result.answer == "The mean is 3.0." and result.cells[0].ok
        assert room != str(work)  # the sandbox's own work dir
        # the scripted server numbers its tool calls across both runs: ids left out
        sent.append(
            [re.sub(r"call_\d+", "call", str(r.messages)) for r in fake_llm.requests[before:]]
        )
        assert "3.0" in sent[-1][1] and room not in str(sent[-1])
    assert len(sent[0]) == 2 and sent[0] == sent[1]
