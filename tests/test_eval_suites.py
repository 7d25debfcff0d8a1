"""The eval's newer suites (messy-real, follow-up chains, generic): every expected answer is
computable and finite, the data writers are deterministic, halves are balanced, the
no-data control withholds the file, and the strict scorer accepts a right answer and
rejects a wrong one. No model is run."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

from analysis_tasks import TASKS, Expected  # noqa: E402
from eval_analysis import (  # noqa: E402
    ALL_TASKS,
    arguments,
    prepare,
    report,
    run_chain,
    score,
    select,
)
from fake_openai import run_cell, text  # noqa: E402
from followup_tasks import CHAINS, FOLLOWUP_TASKS  # noqa: E402
from generic_tasks import GENERIC_TASKS  # noqa: E402
from messy_data import MESSY_DATASETS, messy_source, write_messy_dataset  # noqa: E402
from messy_tasks import MESSY_TASKS  # noqa: E402
from real_tasks import REAL_TASKS  # noqa: E402


def _balanced(halves: list[str]) -> bool:
    return abs(halves.count("tuned") - halves.count("held-out")) <= 1


def _right(e: Expected) -> str:
    """``e``'s value written as a right answer would write it."""
    return e.value if isinstance(e.value, str) else f"{e.value:.{e.decimals}f}"


def _wrong(e: Expected) -> str:
    """A value the scorer must reject: another word, or the number off by a step."""
    if isinstance(e.value, str):
        return {"significant": "not significant", "not significant": "significant",
                "normal": "not normal", "not normal": "normal"}.get(e.value, e.value + "x")  # fmt: skip
    return f"{e.value + 3 * 10 ** (-e.decimals):.{e.decimals}f}"


def _answer(task, expected: list[Expected], wrong: str = "") -> str:
    values = {e.name: (_wrong(e) if e.name == wrong else _right(e)) for e in expected}
    if task.slots:
        return " ".join(f"@{name}[{value}]" for name, value in values.items())
    return "; ".join(f"{name.replace('_', ' ')} is {value}" for name, value in values.items())


@pytest.fixture(scope="module")
def messy_frames(tmp_path_factory) -> dict[str, pd.DataFrame]:
    folder = tmp_path_factory.mktemp("messy")
    return {name: write_messy_dataset(name, folder)[1] for name in MESSY_DATASETS}


# ---------------------------------------------------------------- messy-real
def test_messy_suite_has_forty_tasks_in_balanced_halves_per_category():
    assert len(MESSY_TASKS) >= 40
    ids = [t.id for t in ALL_TASKS]
    assert len(set(ids)) == len(ids) and {t.id for t in MESSY_TASKS} <= set(ids)
    assert {t.suite for t in MESSY_TASKS} == {"messy"}
    assert _balanced([t.half for t in MESSY_TASKS])
    for category in {t.category for t in MESSY_TASKS}:
        assert _balanced([t.half for t in MESSY_TASKS if t.category == category]), category
    assert {"verdict", "outliers", "dates", "feature engineering", "train/test split",
            "group stats", "missing values", "label"} <= {t.category for t in MESSY_TASKS}  # fmt: skip
    assert {t.slots for t in MESSY_TASKS} == {True, False}
    assert len({t.dataset for t in MESSY_TASKS}) >= 10


def test_messy_files_are_deterministic_and_messy_as_their_writers_say(tmp_path):
    for name, (file, write, _) in MESSY_DATASETS.items():
        a, b = tmp_path / "a", tmp_path / "b"
        for folder in (a, b):
            folder.mkdir(exist_ok=True)
            write(folder / file)
        assert (a / file).read_bytes() == (b / file).read_bytes(), name
    raw = {
        name: (tmp_path / "a" / file).read_bytes() for name, (file, _, _) in MESSY_DATASETS.items()
    }
    assert b"\t" in raw["cars"].splitlines()[0] and b"|" in raw["seattle"].splitlines()[0]
    assert b"Species ," in raw["penguins"] and b"Body Mass (g) ," in raw["penguins"]
    assert "Édouard".encode("latin-1") in raw["election"]  # latin-1, not UTF-8
    with pytest.raises(UnicodeDecodeError):
        raw["election"].decode("utf-8")
    assert b'"2,705"' in raw["cars93"] and b"1.8 L" in raw["cars93"] and b"rotary" in raw["cars93"]
    assert b"50 kg" in raw["msleep"] and b",None," in raw["survey"]
    assert b"8,425,333" in raw["gapminder"] and b"April 30, 1992" in raw["riots"]
    assert b"0.5%" in raw["wind"] and b"Jan 1 2000" in raw["stocks"]
    # the traps are real: a plain read gets them wrong
    plain = pd.read_csv(tmp_path / "a" / "survey.csv")
    assert plain["Exer"].isna().sum() > 0


def test_messy_readers_recover_the_package_data(messy_frames):
    """The careful reader's parse of each messy file is the data the package ships."""
    checks = {
        "penguins": ["Body Mass (g)", "Delta 15 N (o/oo)", "Flipper Length (mm)"],
        "cars": ["Miles_per_Gallon", "Horsepower", "Acceleration"],
        "seattle": ["precipitation", "temp_max", "wind"],
        "airquality": ["Ozone", "Solar.R", "Temp"],
        "cars93": ["Weight", "EngineSize", "Luggage.room"],
        "msleep": ["bodywt", "brainwt", "sleep_total"],
        "gapminder": ["pop", "lifeExp"],
        "election": ["Coderre", "total"],
        "survey": ["Height", "Pulse"],
        "riots": ["age"],
        "economics": ["psavert", "uempmed"],
        "wind": ["frequency"],
        "stocks": ["price"],
    }
    assert set(checks) == set(MESSY_DATASETS)
    for name, columns in checks.items():
        source, parsed = messy_source(name), messy_frames[name]
        assert len(parsed) == len(source), name
        for col in columns:
            want = source[col].astype(float).to_numpy()
            got = parsed[col].astype(float).to_numpy()
            assert ((got == want) | (pd.isna(got) & pd.isna(want))).all(), (name, col)
    assert messy_frames["survey"]["Exer"].isna().sum() == 0
    assert messy_frames["cars"]["Year"].dt.year.between(1970, 1982).all()
    assert messy_frames["penguins"]["Date Egg"].dt.year.isin([2007, 2008, 2009]).all()


def test_every_messy_answer_is_finite_and_its_prompt_names_the_file(messy_frames):
    for task in MESSY_TASKS:
        expected = task.answers(messy_frames[task.dataset])
        assert len(expected) >= 2, task.id
        for e in expected:
            assert isinstance(e.value, str) or math.isfinite(e.value), (task.id, e)
        prompt = task.prompt(expected)
        assert MESSY_DATASETS[task.dataset][0] in prompt
        assert all(f"@{e.name}[" in prompt for e in expected) == task.slots
        if any(e.value in ("significant", "not significant", "normal", "not normal")
               for e in expected):  # fmt: skip
            assert task.slots, f"{task.id}: a verdict in prose is matched inside its negation"
    verdicts = Counter(
        e.value for t in MESSY_TASKS for e in t.answers(messy_frames[t.dataset])
        if e.name == "verdict"
    )  # fmt: skip
    assert verdicts["significant"] >= 2 and verdicts["not significant"] >= 2


def test_scorer_takes_each_messy_right_answer_and_rejects_each_wrong_one(messy_frames):
    for task in MESSY_TASKS:
        expected = task.answers(messy_frames[task.dataset])
        assert score(task, expected, "ok", _answer(task, expected), "", False).solved, task.id
        for e in expected:
            wrong = score(task, expected, "ok", _answer(task, expected, e.name), "", False)
            assert not wrong.solved, (task.id, e.name)


def test_no_data_control_keeps_the_file_out_of_the_work_dir(tmp_path):
    task = next(t for t in MESSY_TASKS if t.dataset == "election")
    work, df = prepare(task, tmp_path / "control", no_data=True)
    assert list(work.iterdir()) == [] and len(df) == 58
    assert (tmp_path / "control" / "_withheld" / task.id / task.file).exists()
    given, _ = prepare(task, tmp_path / "given", no_data=False)
    assert [p.name for p in given.iterdir()] == [task.file]
    # the answers are the same either way: computed from the file as written
    assert task.answers(df) == task.answers(_)


def test_report_prints_every_suite_and_half():
    rows = [
        dict(suite=suite, half=half, category="c", solved=ok, kind="solved" if ok else "format",
             in_outputs=False, seconds=1)
        for suite in ("synthetic", "real", "messy", "messy no-data")
        for half, ok in (("tuned", True), ("held-out", False))
    ]  # fmt: skip
    text = report(rows)
    for line in ("tuned     1/1", "held-out  0/1", "real tuned 1/1", "real held-out 0/1",
                 "messy tuned 1/1", "messy held-out 0/1", "messy no-data tuned 1/1"):  # fmt: skip
        assert line in text, line
    rows[0]["failed_cells"], rows[1]["failed_cells"] = 2, 1
    assert "runs that hit a failing cell: 2, 1 of them ended right" in report(rows)
    assert len(TASKS) + len(REAL_TASKS) + len(MESSY_TASKS) + len(GENERIC_TASKS) == len(ALL_TASKS)


# ---------------------------------------------------------------- follow-up chains
def test_eight_or_more_chains_of_three_halved_by_chain(messy_frames):
    assert len(CHAINS) >= 8 and len(FOLLOWUP_TASKS) == 3 * len(CHAINS)
    assert all(len(c.steps) == 3 for c in CHAINS)
    assert _balanced([c.half for c in CHAINS])
    for chain in CHAINS:
        assert {s.half for s in chain.steps} == {chain.half}, chain.id
        assert chain.dataset in MESSY_DATASETS
    ids = [t.id for t in [*ALL_TASKS, *FOLLOWUP_TASKS]] + [c.id for c in CHAINS]
    assert len(set(ids)) == len(ids)


def test_only_a_chains_first_question_names_the_file(messy_frames):
    for chain in CHAINS:
        file = MESSY_DATASETS[chain.dataset][0]
        for n, step in enumerate(chain.steps):
            expected = step.answers(messy_frames[chain.dataset])
            assert expected and all(
                isinstance(e.value, str) or math.isfinite(e.value) for e in expected
            ), step.id
            assert (file in step.prompt(expected)) == (n == 0), step.id
            assert step.suite == "followup"


def test_scorer_takes_each_follow_up_right_answer_and_rejects_each_wrong_one(messy_frames):
    for step in FOLLOWUP_TASKS:
        expected = step.answers(messy_frames[step.dataset])
        assert score(step, expected, "ok", _answer(step, expected), "", False).solved, step.id
        for e in expected:
            assert not score(
                step, expected, "ok", _answer(step, expected, e.name), "", False
            ).solved


@pytest.mark.timeout(180)
def test_a_chain_runs_in_one_kernel_and_is_scored_per_question(fake_llm, tmp_path, monkeypatch):
    """The third question reads a frame only the second one made: the chain's questions go to
    one agent and one kernel, and each is scored on its own run's answer."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("KERNEL_AGENT_SANDBOX", "none")
    monkeypatch.setenv("KERNEL_AGENT_HOME", str(tmp_path / "home"))
    chain = next(c for c in CHAINS if c.id == "chain-penguins")
    _, df = write_messy_dataset("penguins", tmp_path)
    (rows,) = chain.steps[0].answers(df)
    gentoo_n, mass = chain.steps[1].answers(df)
    (corr,) = chain.steps[2].answers(df)
    fake_llm.enqueue(
        run_cell("import pandas as pd\npeng = pd.read_csv('penguins_lter.csv')\n"
                 "peng.columns = peng.columns.str.strip()\n"
                 "peng = peng.dropna(subset=['Body Mass (g)'])\nprint(len(peng))"),
        text(f"@rows[{rows.value:.0f}]"),
        run_cell("gentoo = peng[peng['Species'].str.startswith('Gentoo')]\n"
                 "print(len(gentoo), round(gentoo['Body Mass (g)'].mean(), 2))"),
        text(f"There are {gentoo_n.value:.0f} Gentoo penguins; their mean mass is {mass.value:.2f} g."),
        run_cell("print(round(gentoo['Flipper Length (mm)'].corr(gentoo['Body Mass (g)']), 3))"),
        text(f"@correlation[{corr.value + 0.01:.3f}]"),  # a wrong third answer
    )  # fmt: skip
    args = arguments(["--levers", "none", "--model", "test-model", "--base-url",
                      fake_llm.base_url, "--only", chain.id])  # fmt: skip
    assert select(args) == ([], [chain])
    out = run_chain(chain, args, tmp_path / "run")
    assert [r["task"] for r in out] == [s.id for s in chain.steps]
    assert [r["step"] for r in out] == [1, 2, 3] and {r["chain"] for r in out} == {chain.id}
    assert [r["solved"] for r in out] == [True, True, False], [r["answer"] for r in out]
    assert out[2]["kind"] == "wrong value" and out[2]["in_outputs"]  # the kernel had gentoo
    assert len({r["notebook"] for r in out}) == 1  # one kernel, one transcript
    prompts = [m.last_user_text for m in fake_llm.requests if m.last_user_text]
    assert sum("penguins_lter.csv" in p for p in set(prompts)) == 1
    text_ = report(out)
    assert "followup tuned chains 0/1 all right (by step 1: 1/1, 2: 1/1, 3: 0/1)" in text_


# ---------------------------------------------------------------- generic
def test_twenty_generic_tasks_in_balanced_halves_with_no_data_file():
    assert len(GENERIC_TASKS) >= 20 and {t.suite for t in GENERIC_TASKS} == {"generic"}
    assert _balanced([t.half for t in GENERIC_TASKS])
    for category in {t.category for t in GENERIC_TASKS}:
        assert _balanced([t.half for t in GENERIC_TASKS if t.category == category]), category
    assert {"calendar", "sequence", "numeric method", "string puzzle"} == {
        t.category for t in GENERIC_TASKS
    }
    for task in GENERIC_TASKS:
        expected = task.answers(None)
        assert expected and all(
            isinstance(e.value, str) or math.isfinite(e.value) for e in expected
        )
        assert "Using the file" not in task.prompt(expected)
    # nothing to withhold: the control leaves the generic suite out
    tasks, _ = select(arguments(["--suite", "generic", "--no-data"]))
    assert tasks == []


def test_generic_answers_agree_with_a_second_route():
    """Spot checks of the computed answers against known values."""
    got = {t.id: {e.name: e.value for e in t.answers(None)} for t in GENERIC_TASKS}
    assert got["gen-weekday"]["weekday"] == "Friday"
    assert got["gen-fibonacci"]["f40"] == 102334155
    assert got["gen-primes"] == {"count": 1229, "sum": 5736396}
    assert got["gen-collatz"] == {"start": 6171, "steps": 261}
    assert got["gen-power-digits"] == {"digits": 302, "digit_sum": 1366}
    assert round(got["gen-newton"]["root"], 6) == 2.094551
    assert round(got["gen-loan"]["payment"], 2) == 1539.29
    assert got["gen-anagrams"]["arrangements"] == 34650
    assert got["gen-caesar"]["plain_text"] == "the secret meeting is at noon"


def test_scorer_takes_each_generic_right_answer_and_rejects_each_wrong_one():
    for task in GENERIC_TASKS:
        expected = task.answers(None)
        assert score(task, expected, "ok", _answer(task, expected), "", False).solved, task.id
        for e in expected:
            assert not score(
                task, expected, "ok", _answer(task, expected, e.name), "", False
            ).solved


def test_suite_selection():
    every, chains = select(arguments([]))
    assert {t.suite for t in every} == {"synthetic", "real", "messy", "generic"}
    assert chains == CHAINS
    held, held_chains = select(arguments(["--suite", "messy", "--half", "held-out"]))
    assert held and {(t.suite, t.half) for t in held} == {("messy", "held-out")}
    assert held_chains == []
    control, control_chains = select(arguments(["--no-data"]))
    assert "generic" not in {t.suite for t in control} and control_chains == CHAINS
