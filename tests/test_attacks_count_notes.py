"""The count and empty-value notes quote what the kernel produced: the cell's printed
labels and slots, the namespace report (names, shapes, columns, non-missing counts), the
kernel's answers to the stated rule's and the empty filter's probes, and the model's code. Hostile input, quoted
to the model.

The property: whatever a cell prints and the kernel reports, a note is at most
``MAX_NOTE`` characters, and a forged report never crashes the check (payloads below
were written for no one branch; sizes and shapes are random).
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

from nbformat.v4 import new_output

from kernel_agent.agent.empty_filter import empty_filter, filter_probe
from kernel_agent.agent.empty_value import empty_note, empty_value
from kernel_agent.agent.every_row import every_row_counted
from kernel_agent.agent.missing_rows import one_column_missing
from kernel_agent.agent.named_value import unused_named_value
from kernel_agent.agent.pitfalls import rows_for_one_value
from kernel_agent.agent.slot_kind import not_a_count
from kernel_agent.agent.stated_rule import rule_note, rule_probe, stated_rule
from kernel_agent.agent.value_range import out_of_range, range_note, range_probe, ranges_of
from kernel_agent.kernel_state.namespace import parse_summary
from kernel_agent.kernel_state.preview_facts import FACTS_MARK, split_facts
from kernel_agent.llm.view import render_cell
from kernel_agent.results import CellResult

MAX_NOTE = 2_000
NOW = datetime.now(timezone.utc)
TASKS = [
    "How many rows are outliers? @n[count]",
    "How many people have no age recorded?",
    "How many missing values, and the number of others?",
    "What is the correlation? @corr[value]",
]


def _report(rng: random.Random) -> dict:
    columns = ["c" * rng.randint(1, 5000) + str(i) for i in range(rng.randint(1, 25))]
    counts = rng.choice([
        [rng.randint(0, 10**6) for _ in columns[:20]], [397] * 20, [True], "397", [-5], [],
        [10**40], [{"x": 1}],
    ])  # fmt: skip
    return {
        "type": rng.choice(["DataFrame", "Series", "int", "T" * 300]),
        "shape": rng.choice(["(397, 6)", "(" + "9" * 400 + ",)", "(x, y)", "()", 397]),
        "columns": columns,
        "counts": counts,
    }


def _cell(rng: random.Random) -> CellResult:
    big = "q" * rng.randint(1, 200_000)
    names = [f"v{i}" for i in range(5)]
    code = rng.choice([
        f"n = sum(v0['{big[:3000]}'] & v1.{big[:3000]} < v2)\nprint(n)",
        f"print(v0[v0['{big[:5000]}'] > 1 & v1.x < 2])",
        "x = " + " & ".join(f"v{i % 5}.c > {i}" for i in range(2000)),
        f"print(v3.{big[:200]}.isna().sum(), v4.dropna().count())",
    ])  # fmt: skip
    printed = rng.choice([
        f"@{big}[397]\n", f"@n[397]\n{big}: 397\n", f"{big[:110]}: 397\n", f"@corr[nan]\n{big}\n",
        f"{big[:60]} = None\n", "@n[" + "9" * 5000 + "]\n", f"@{names[0]}[<NA>]",
        f"@n[0.{big[: rng.randint(1, 60)]}5]\n@n[1.5]\n", f"@n[{rng.uniform(0, 99)}]\n",
    ])  # fmt: skip
    outputs = [new_output("stream", name="stdout", text=printed)]
    return CellResult(code, "ok", 1, outputs, None, NOW, NOW)


def test_every_count_and_empty_note_is_bounded_whatever_the_kernel_sent():
    rng = random.Random(12)
    noted = {"count": 0, "empty": 0, "kind": 0}
    for _ in range(300):
        report = {f"v{i}": _report(rng) for i in range(5)}
        raw = {"status": "ok", "data": {"text/plain": repr(json.dumps(report))}}
        namespace = parse_summary(raw) or {}
        cell, task = _cell(rng), rng.choice(TASKS)
        if (found := every_row_counted(task, cell, namespace)) is not None:
            noted["count"] += 1
            assert len(found.note()) <= MAX_NOTE, len(found.note())
        if (wrong := not_a_count(task, render_cell(cell, budget=4000).text)) is not None:
            noted["kind"] += 1
            assert len(wrong.note()) <= MAX_NOTE, len(wrong.note())
        if (label := empty_value(task, cell)) is not None:
            noted["empty"] += 1
            assert len(empty_note(label)) <= MAX_NOTE, len(empty_note(label))
    assert min(noted.values()) >= 5, noted  # the payloads reach every note


def _recount(rng: random.Random) -> object:
    """What a kernel may answer the stated rule's probe with: the shape asked, or not."""
    reading = {"counts": [rng.randint(0, 50)], "fences": [rng.uniform(-9, 9), 1e308]}
    return rng.choice([
        {"n": 60, "found": [reading] * rng.randint(1, 25)},
        {"n": 10**40, "found": [{"counts": [10**30], "fences": [0, 1]}]},
        {"n": 60, "found": [{"counts": list(range(5000)), "fences": [0, 1]}]},
        {"n": 60, "found": [{"counts": [3], "fences": ["0", [1]]}]},
        {"n": 60, "found": [{"counts": [3], "fences": [0, 1], "x": "q" * 300_000}]},
        [[[[[]]]]] * 1000, "q" * 300_000, None, 7,
    ])  # fmt: skip


def test_the_stated_rule_note_is_bounded_whatever_the_kernel_answered():
    """The rule's probe is answered by the kernel: forged shapes, sizes and numbers give
    no note or a bounded one, and never an exception; the recount of a cell that names
    long series, and prints long labels and values, stays bounded too."""
    rng = random.Random(31)
    task = (
        "Using the IQR rule, how many are outliers and what is the lower fence?\n"
        "Give the final answer in this format: @outliers[count] @lower_fence[value]"
    )
    rule = stated_rule(task)
    assert rule is not None
    notes = 0
    for _ in range(200):
        big = "q" * rng.randint(1, 3000)
        code = rng.choice([
            f"print(v0['{big}'].quantile(0.25), v1.{big[:250]}.std())",
            "print(" + " + ".join(f"v{i}['c'].quantile(0.5)" for i in range(500)) + ")",
            f"print(v0[v0.x > 1]['{big[:250]}'].quantile(0.75))",
        ])  # fmt: skip
        printed = rng.choice([
            f"@outliers[{rng.randint(0, 99)}]\n", f"@lower_fence[{'0.' + '0' * 3000}1]\n",
            "@outliers[" + "9" * 3000 + "]\n", f"@lower_fence[{rng.uniform(-99, 99)}]\n",
            f"Number of outliers{big}: 12\n",
        ])  # fmt: skip
        answers = {
            key: {"status": "ok", "data": {"text/plain": repr(json.dumps(_recount(rng)))}}
            for key in rule_probe(rule, code)
        }
        assert len(answers) <= 3 and all(len(e) < 5_000 for e in rule_probe(rule, code).values())
        outputs = [new_output("stream", name="stdout", text=printed)]
        cell = CellResult(code, "ok", 1, outputs, None, NOW, NOW, user_expressions=answers)
        if (found := rule_note(task, rule, cell)) is not None:
            notes += 1
            assert len(found.note) <= MAX_NOTE, len(found.note)
    assert notes >= 5  # the payloads reach the note


def test_the_code_notes_are_bounded_whatever_the_code_names():
    """The missing-rows note quotes the model's code back (its frame and column names):
    with names of 100,000 characters and thousands of comparisons, every note stays
    bounded and every check returns."""
    rng = random.Random(5)
    tasks = [
        "How many days have at least one missing value, and how many fell on a Saturday?",
        "Compare x between the islands Dream and Torgersen with Welch's t-test, in 1973.",
    ]
    found = 0
    for _ in range(60):
        big = "q" * rng.randint(1, 100_000)
        many = " | ".join(f"({big[:50]}['Day'] == {i % 8})" for i in range(rng.randint(1, 3000)))
        code = rng.choice([
            f"print({big}['{big}day of month'].isna().sum(), ({big}['Day'] == 6).sum())",
            f"print(({many}).sum())",
            f"n = {big}[{big}['day_of_month_{big}'].isin([5, 6])]",
            f"d = {big}[({big}['Island'] == 'Dream') & ({big}.x > 1)]\n"
            f"stats.ttest_ind(d['{big}'], d['x{big}'])",
            f"stats.ttest_ind({big}['a'], {big}['b'])",
        ])  # fmt: skip
        for task in tasks:
            if (note := one_column_missing(task, code)) is not None:
                found += 1
                assert len(note) <= MAX_NOTE, len(note)
    assert found >= 5, found  # the payloads reach the note


def _no_rows(rng: random.Random) -> object:
    """What a kernel may answer the empty filter's probe with: the shape asked, or not."""
    big = "v" * rng.randint(1, 100_000)
    return rng.choice([
        {"n": rng.randint(1, 10**12), "hits": 0, "missing": 0, "kind": "number",
         "low": rng.uniform(-1e300, 1e300), "high": rng.choice([1e308, 5, -0.0]),
         "instead": rng.choice([65, 65, 10**400, True, None, big, [65]])},
        {"n": 60, "hits": 0, "missing": rng.randint(0, 60), "kind": "text",
         "distinct": rng.randint(0, 10**12), "values": [big[: rng.randint(0, 40)]] * 8,
         "near": ["\n`'" * 13] * 3, "instead": rng.choice([" Q", " Q", big, "\n`'" * 13, 7])},
        {"n": 60, "hits": 0, "missing": 0, "kind": "date", "low": big[:40], "high": "\x00" * 40},
        {"n": 60, "hits": 0, "missing": 0, "kind": "text", "distinct": 3, "values": [big]},
        {"n": 60, "hits": 0, "missing": 0, "kind": "empty"},
        {"n": 60, "hits": 0, "missing": 0, "kind": "number", "low": 1, "high": big},
        [[[[[]]]]] * 1000, big, None, 7,
    ])  # fmt: skip


def test_the_empty_filter_note_is_bounded_whatever_the_kernel_answered():
    """The empty filter's probe is answered by the kernel, and its note quotes the model's
    condition: forged shapes, sizes and texts, with conditions on names of up to 100,000
    characters and thousands of them, give no note or a bounded one, never an exception;
    the probe itself stays bounded."""
    rng = random.Random(17)
    notes = rewrites = 0
    for _ in range(200):
        big = "q" * rng.randint(1, 100_000)
        many = " | ".join(f"(v0['c{i}'] == {i})" for i in range(rng.randint(1, 3000)))
        code = rng.choice([
            f"print((v0['{big}'] == 1965).sum())",
            f"print((v0['{big[:250]}'] == 1965).sum())",
            f"print((v0.x == '{big[:250]}').sum(), (v0.x == 'q').sum())",
            f"print(v0[v0.x == '{big[:250]}'].mean())",
            f"print(({many}).sum())",
            f"print(v0[v0['{big[:200]}'].isin([{', '.join(map(str, range(3000)))}])])",
            f"print(v1.{big[:200]}.str.contains('a').sum())",
        ])  # fmt: skip
        probe = filter_probe(code)
        assert len(probe) <= 3 and all(len(e) < 6_000 for e in probe.values())
        answers = {
            key: {"status": "ok", "data": {"text/plain": repr(json.dumps(_no_rows(rng)))}}
            for key in probe
        }
        printed = rng.choice(["0\n", "@n[nan]\n", f"{big[:100]}: 0\n", "Empty DataFrame\n"])
        outputs = [new_output("stream", name="stdout", text=printed)]
        cell = CellResult(code, "ok", 1, outputs, None, NOW, NOW, user_expressions=answers)
        if (found := empty_filter(cell)) is not None:
            notes += 1
            assert len(found.note()) <= MAX_NOTE, len(found.note())
            rewrites += found.instead is not None
            assert found.instead is None or len(found.instead) <= 300 + 40
    assert notes >= 5 and rewrites >= 2, (notes, rewrites)  # the payloads reach the note


def _facts_text(rng: random.Random) -> str:
    """What a kernel may send as the preview's facts: the values of its text columns."""
    word = rng.choice(["Citroën", "a(b", "[x]*", "é" * 99, "q" * 5000, "Car.*s", ""])
    values = {
        f"c{i}" * rng.randint(1, 60): [word + str(j) * rng.randint(0, 3) for j in range(40)]
        for i in range(rng.randint(1, 600))
    }
    files = {f"f{i}.csv": {"columns": list(values), "values": values} for i in range(3)}
    return "preview\n" + FACTS_MARK + json.dumps(files)


def test_the_named_value_note_is_bounded_whatever_the_facts_and_cells_hold():
    """The values the kernel says its columns hold, and what its cells print, are quoted
    in the note: a value of any length or pattern is at most 60 characters there, a
    column name as the facts allow, and a forged report never crashes the check."""
    rng = random.Random(31)
    noted = 0
    for _ in range(20):
        facts = split_facts(_facts_text(rng))[1]
        task = rng.choice([
            "What is the mean price of the Citroën0 cars?", "How many a(b rows?",
            "Mean of [x]*11 and Car.*s?", "Which is the most common?",
        ])  # fmt: skip
        cells = [_cell(rng) for _ in range(3)]
        if (found := unused_named_value(task, cells, facts)) is not None:
            noted += 1
            assert len(found.note()) <= MAX_NOTE, len(found.note())
            assert found.value.lower() in task.lower()
    assert noted >= 3, noted  # the payloads reach the note


def test_the_range_note_is_bounded_whatever_the_kernel_answered():
    """The kernel's answers to the range probe are forged (numbers of any size, shapes not
    asked, huge texts); column names come from the model's code. A note quotes at most
    three ranges, each of a name the probe would ask about (200 characters at most)."""
    rng = random.Random(47)
    noted = 0
    for _ in range(300):
        names = ["x" * rng.choice([1, 150, 200, 5000]) for _ in range(rng.randint(1, 9))]
        code = "\n".join(f"print(df[{n!r}].mean())" for n in names)
        task = "What is the mean rating?"
        answers = [
            rng.choice(
                [
                    [rng.uniform(-1e9, 1e9), 1e308],
                    [0, 1],
                    [1e-300, 2e-300],
                    [5, 1],
                    [[1], [2]],
                    "q" * 300_000,
                    None,
                    [1, 2, 3],
                    {"low": 0},
                    [float("nan"), 1],
                ]
            )  # fmt: skip
            for _ in names
        ]
        probe = range_probe(task, code)
        assert len(probe) <= 6
        raw = {k: {"status": "ok", "data": {"text/plain": repr(json.dumps(a))}}
               for k, a in zip(probe, answers, strict=False)}  # fmt: skip
        cell = CellResult(code, "ok", 1, [], None, NOW, NOW, user_expressions=raw)
        ranges = {(r.frame, r.column): r for r in ranges_of(cell)}
        assert all(len(r.column) <= 200 and r.low <= r.high for r in ranges.values())
        answer = rng.choice(["9" * 5000, "The mean is 1e308.", "-3", "@m[" + "7" * 300 + "]"])
        if (found := out_of_range(task, answer, ranges)) is not None:
            noted += 1
            assert len(range_note(*found)) <= MAX_NOTE, len(range_note(*found))
    assert noted >= 5, noted  # the payloads reach the note


def test_a_series_length_the_kernel_printed_is_read_bounded():
    """The length in a printed Series footer is the kernel's text: 5,000 digits of it (past
    Python's int conversion limit) or 200,000 numbered rows never crash the check."""
    task = "What is the total revenue?"
    for text in (
        "x\nName: a, Length: " + "9" * 5000 + ", dtype: float64\n",
        "".join(f"{i}    1.0\n" for i in range(200_000)) + "Name: a, dtype: float64\n",
        ":" * 100_000 + "1 2\n",
    ):
        cell = CellResult("print(x)", "ok", 1, [new_output("stream", name="stdout", text=text)],
                          None, NOW, NOW)  # fmt: skip
        found = rows_for_one_value(task, cell)
        assert found is None or 20 <= found <= 10**9
