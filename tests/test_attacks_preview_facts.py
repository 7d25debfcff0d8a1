"""The data preview's facts come from the kernel: hostile input to the host.

The kernel can answer the preview's expression with anything. ``split_facts`` must stay
bounded and keep only the expected shape, and whatever names it keeps reach the code that
``preflight`` writes only as string literals (a column named like code stays a string).
"""

from __future__ import annotations

import ast
import json
import time

from kernel_agent.agent.preflight import preflight
from kernel_agent.kernel_state.kernel_probe import FACTS_MARK
from kernel_agent.kernel_state.preview_facts import split_facts

EVIL = "x'] + __import__('os').system('id') + df['"


def test_hostile_names_and_values_reach_the_code_only_as_string_literals():
    facts_json = {
        "d.csv": {
            "read": {"sep": ";", "encoding": "latin-1", "decimal": True},
            "columns": [EVIL, "Species "],
            "values": {"Species ": [EVIL + "x"]},
            "numeric": [EVIL],
            "dates": {EVIL: "%d/%m/%Y"},
        }
    }
    _, facts = split_facts("preview" + FACTS_MARK + json.dumps(facts_json))
    code = (
        "import pandas as pd\n"
        "df = pd.read_csv('d.csv')\n"
        "print(df[\"x'] + __IMPORT__('os').SYSTEM('id') + df['\"])\n"  # a near-miss name
        f"print(df[df['Species '] == {EVIL[:6]!r}])\n"
        f"df[{EVIL!r}] = pd.to_datetime(df[{EVIL!r}])\n"
    )
    fixed = preflight(code, facts)
    assert fixed != code  # the facts were used
    tree = ast.parse(fixed)
    calls = {
        getattr(n.func, "attr", getattr(n.func, "id", ""))
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
    }
    assert "system" not in calls and "__import__" not in calls  # no name became code
    assert EVIL in {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}


def test_malformed_deep_or_oversized_facts_are_dropped_quickly():
    payloads = [
        "[" * 200_000 + "]" * 200_000,  # deeper than the parser goes
        json.dumps({f"f{i}.csv": {"columns": ["a"] * 10_000} for i in range(200)}),
        json.dumps({"a.csv": {"columns": ["c" * 10_000], "read": {"sep": "\x00"}}}),
        json.dumps({"a.csv": {"columns": ["a"], "dates": {"a": "%Y'); import os; ('"}}}),
        json.dumps({"a.csv": {"columns": ["a"], "read": {"sep": ",", "encoding": "x" * 99}}}),
        "null",
        '"a string"',
    ]
    for tail in payloads:
        started = time.monotonic()
        text, facts = split_facts("preview" + FACTS_MARK + tail)
        assert time.monotonic() - started < 5
        assert text == "preview"
        assert len(facts) <= 50
        for file in facts.values():
            assert len(file.columns) <= 500 and all(len(c) <= 200 for c in file.columns)
            assert file.sep in (",", ";", "\t", "|") and len(file.encoding) <= 20
            assert all("'" not in f and ";" not in f for f in file.dates.values())
