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


def test_facts_listing_many_columns_in_every_field_stay_bounded_and_well_shaped():
    """Every field a file's facts hold, each as wide as the message allows, with entries of
    every JSON type: what is kept names the file's own columns, at most one per column, and
    reading it takes about as long as reading its text (membership is not a scan)."""
    names = [f"c{i}" for i in range(500)]
    junk: list[object] = [[1], {"a": 1}, None, 3.5, True, "x" * 300]
    many = [*junk, *(f"n{i}" for i in range(100_000)), *names]
    mapping = {f"n{i}": ["."] for i in range(100_000)} | {c: ["NA"] for c in names}
    entry = {
        "columns": [*junk, *names],
        "numeric": many,
        "units": many,
        "whole": many,
        "lists": many,
        "dates": {c: "%Y-%m-%d" for c in mapping},
        "values": mapping,
        "missing": mapping,
    }
    tail = json.dumps({"a.csv": entry})
    started = time.monotonic()
    json.loads(tail)
    parsing = time.monotonic() - started
    started = time.monotonic()
    _, facts = split_facts("preview" + FACTS_MARK + tail)
    assert time.monotonic() - started < 3 * parsing + 0.2  # 6x before the names were a set
    file = facts["a.csv"]
    assert set(file.columns) <= set(names)
    kept_fields = (file.numeric, file.units, file.whole, file.lists, file.dates, file.values)
    for kept in (*kept_fields, file.missing):
        assert set(kept) <= set(file.columns) and len(kept) <= 500


def test_a_forged_count_of_lines_to_skip_reaches_a_read_only_as_a_small_whole_number():
    """``skiprows`` is written into the model's read call: anything but an int from 0 to 50
    (a string of code, a float, a bool, a huge or negative number, a list) reads as 0."""
    code = "import pandas as pd\ndf = pd.read_csv('d.csv')"
    forged = [
        "1); import os; os.system('id'); (",
        1.5,
        True,
        10**30,
        -1,
        51,
        [1, 2],
        {"n": 1},
        None,
    ]
    for skip in forged:
        entry = {"read": {"sep": ",", "encoding": "utf-8", "skip": skip}, "columns": ["a"]}
        _, facts = split_facts("preview" + FACTS_MARK + json.dumps({"d.csv": entry}))
        assert facts["d.csv"].skiprows == 0, skip
        assert preflight(code, facts) == code, skip
    entry = {"read": {"sep": ",", "encoding": "utf-8", "skip": 50}, "columns": ["a"]}
    _, facts = split_facts("preview" + FACTS_MARK + json.dumps({"d.csv": entry}))
    assert preflight(code, facts) == code[:-1] + ", skiprows=50)"


def test_forged_read_shapes_reach_a_read_only_as_the_fixed_words_they_stand_for():
    """``skipfooter``, ``skipinitialspace`` and ``header=None`` are written into the
    model's read call: a footer count that is not an int from 0 to 5, and flags that are
    not ``true`` itself (strings of code, 1, lists), add nothing."""
    code = "import pandas as pd\ndf = pd.read_csv('d.csv')"
    forged = ["1); import os; os.system('id'); (", 1.5, True, 10**30, -1, 6, [1], "true", 1, None]
    for value in forged:
        flag = "yes" if value is True else value  # True is a flag's one true value
        count = 7 if type(value) is int else value  # 1 is a count of lines
        read = {"sep": ",", "encoding": "utf-8", "footer": count, "spaced": flag}
        read["headerless"] = flag
        entry = {"read": read, "columns": ["a"]}
        _, facts = split_facts("preview" + FACTS_MARK + json.dumps({"d.csv": entry}))
        file = facts["d.csv"]
        assert (file.skipfooter, file.spaced, file.headerless) == (0, False, False), value
        assert preflight(code, facts) == code, value
    read = {"sep": ",", "encoding": "utf-8", "footer": 5, "spaced": True, "headerless": True}
    _, facts = split_facts(
        "p" + FACTS_MARK + json.dumps({"d.csv": {"read": read, "columns": ["a"]}})
    )
    assert preflight(code, facts) == code[:-1] + (
        ", skipinitialspace=True, skipfooter=5, engine='python', header=None)"
    )


def test_a_forged_totals_row_reaches_a_cell_only_as_a_string_of_a_column_the_file_has():
    """The label of a totals row is written into the model's cell: a label that is not a
    string, too long, or of a column the file does not have is dropped; one shaped like
    code stays a string literal."""
    code = "import pandas as pd\ndf = pd.read_csv('d.csv')\nprint(df['a'].sum())"
    for total in (["b", "Total"], ["a", 5], ["a", "x" * 41], ["a"], "a", ["a", "T", "x"]):
        entry = {"read": {"sep": ",", "encoding": "utf-8"}, "columns": ["a"], "total": total}
        _, facts = split_facts("preview" + FACTS_MARK + json.dumps({"d.csv": entry}))
        assert facts["d.csv"].total is None and preflight(code, facts) == code, total
    entry = {
        "read": {"sep": ",", "encoding": "utf-8"},
        "columns": [EVIL],
        "total": [EVIL, EVIL[:40]],
    }
    _, facts = split_facts("preview" + FACTS_MARK + json.dumps({"d.csv": entry}))
    fixed = preflight(code, facts)
    assert fixed != code
    calls = {
        getattr(n.func, "attr", "") for n in ast.walk(ast.parse(fixed)) if isinstance(n, ast.Call)
    }
    assert "system" not in calls and EVIL[:40] in {
        n.value for n in ast.walk(ast.parse(fixed)) if isinstance(n, ast.Constant)
    }


def test_forged_row_labels_stay_bounded_strings():
    """The labels of the preview's rows are held against an answer's text: at most 100,
    each a string of at most 200 characters."""
    shown = [1, None, ["x"], "y" * 201, "", *(f"s{i}" for i in range(10_000))]
    entry = {"columns": ["a"], "shown": shown}
    _, facts = split_facts("preview" + FACTS_MARK + json.dumps({"d.csv": entry}))
    kept = facts["d.csv"].shown
    assert len(kept) <= 100 and all(isinstance(v, str) and 0 < len(v) <= 200 for v in kept)
    for forged in ("s1", {"a": 1}, 5):
        _, facts = split_facts(
            "preview" + FACTS_MARK + json.dumps({"d.csv": {"columns": ["a"], "shown": forged}})
        )
        assert facts["d.csv"].shown == ()


def test_forged_kept_marks_reach_a_read_only_as_a_list_of_short_string_literals():
    """``kept`` (the marks of a read that keeps 'NA' as a code) is written into the model's
    read call: anything but a list of up to 11 short strings, the empty field first, with
    no quote, backslash or line break, adds nothing; the good list is written with repr."""
    code = "import pandas as pd\ndf = pd.read_csv('d.csv')"
    forged = [
        "'']); import os; os.system('id'); ([", ["x"], ["", 5], ["", "a'b"], ["", "a\\"],
        ["", "a\nb"], ["", "x" * 21], [""] * 12, {"": ""}, True, None, [],
    ]  # fmt: skip
    for value in forged:
        read = {"sep": ",", "encoding": "utf-8", "kept": value}
        _, facts = split_facts(
            "p" + FACTS_MARK + json.dumps({"d.csv": {"read": read, "columns": ["a"]}})
        )
        assert facts["d.csv"].kept is None and preflight(code, facts) == code, value
    read = {"sep": ",", "encoding": "utf-8", "kept": ["", "n/a", "-"]}
    _, facts = split_facts(
        "p" + FACTS_MARK + json.dumps({"d.csv": {"read": read, "columns": ["a"]}})
    )
    assert preflight(code, facts) == code[:-1] + (
        ", keep_default_na=False, na_values=['', 'n/a', '-'])"
    )
