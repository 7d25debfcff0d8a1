"""Each lever's net effect on a half, measured by switching it off where it acted.

The agent runs at temperature 0 and every task starts a fresh agent, so a task a lever did
not act on runs the same without it. A baseline run of ``eval_analysis.py --json`` records,
per task, every lever that acted (a cell it rewrote, refused or noted; an answer it sent
back). This script runs again only the tasks (or whole follow-up chains) where a lever
acted, with ``--levers=-name``, and reports per lever:

- where it acted, and how many of those tasks were right with it and without it (its net
  effect on the half is the difference: elsewhere nothing changes);
- how often it sent back an answer that was already right, against the half's right answers
  (the issue's bound: at most 1 in 20).

``data_preview``, ``printed_answer`` and ``fenced_rules`` act on every task (the preview
and the slot note are in every first prompt; one block per fenced reply), so they are not
selected here: ablate them on a whole half with ``eval_analysis.py --levers=-name``. A rerun
that differs from the baseline where the lever is absent from both would show the runs are
not deterministic: run a lever name of ``auto`` to rerun the tasks every lever acted on with
all levers on, as that control.

    python bench/ablate_levers.py --baseline base.json [--baseline more.json]
        [--lever NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from eval_analysis import arguments, run_chain, run_task, select, show  # noqa: E402

#: levers that act on every task, so a rerun of "where it acted" would be the whole half
ALWAYS_ON = ("data_preview", "printed_answer", "fenced_rules")


def unit(row: dict) -> str:
    """What is run again for a row: its follow-up chain (the later questions build on the
    earlier ones' kernel state), or its task."""
    return str(row.get("chain") or row["task"])


def acted_on(rows: list[dict]) -> dict[str, list[str]]:
    """Per lever, the tasks or chains it acted on in ``rows``, in run order."""
    where: dict[str, list[str]] = {}
    for row in rows:
        for fired in row.get("levers_fired", []):
            units = where.setdefault(fired["lever"], [])
            if unit(row) not in units:
                units.append(unit(row))
    return where


@dataclass
class Effect:
    lever: str
    units: int  # tasks or chains it acted on
    questions: int  # their questions (a chain has several)
    right_with: int
    right_without: int
    wrong_with: int  # answers stating a wrong value (not "no answer")
    wrong_without: int
    sent_back_right: int  # answers it sent back that were already right
    half_right: int  # right answers in the whole baseline half

    @property
    def net(self) -> int:
        return self.right_with - self.right_without

    def line(self) -> str:
        bound = f"{self.sent_back_right}/{self.half_right}" if self.half_right else "0/0"
        return (f"{self.lever:17} acted on {self.units:2} ({self.questions:2} questions): "
                f"right with it {self.right_with:2}, without {self.right_without:2}, "
                f"net {self.net:+d}; wrong values stated with it {self.wrong_with}, without "
                f"{self.wrong_without}; sent back right answers {bound}")  # fmt: skip


def effect(lever: str, base: list[dict], rerun: list[dict]) -> Effect:
    """``lever``'s effect: the baseline's rows for the units it acted on against ``rerun``
    (the same units without it)."""
    units = acted_on(base).get(lever, [])
    with_it = [r for r in base if unit(r) in units]
    sent_back = sum(
        f["right_before"] is True for r in base for f in r.get("levers_fired", [])
        if f["lever"] == lever
    )  # fmt: skip
    return Effect(
        lever,
        len(units),
        len(with_it),
        sum(r["solved"] for r in with_it),
        sum(r["solved"] for r in rerun),
        sum(r.get("kind") == "wrong value" for r in with_it),
        sum(r.get("kind") == "wrong value" for r in rerun),
        sent_back,
        sum(r["solved"] for r in base),
    )


def rerun(units: list[str], levers: str, options: list[str]) -> list[dict]:
    """``units`` run again with ``--levers=levers``: one row per question."""
    args = arguments([*options, f"--levers={levers}", *(f"--only={u}" for u in units)])
    tasks, chains = select(args)
    root = Path(tempfile.mkdtemp(prefix="ablate-levers-"))
    rows = [run_task(task, args, root) for task in tasks]
    for chain in chains:
        rows += run_chain(chain, args, root)
    shown: list[dict] = []
    show(shown, rows, None)  # each row's line, as the eval prints it
    return shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", action="append", required=True, help="eval --json rows")
    parser.add_argument("--lever", action="append", help="only these (default: every one)")
    parser.add_argument("--json", help="write each lever's rerun rows here")
    parser.add_argument("--reruns", help="an earlier --json: report its rows, run nothing")
    parser.add_argument("--model", default=None)
    parser.add_argument("--base-url", default=None)
    args = parser.parse_args()
    base = [row for path in args.baseline for row in json.loads(Path(path).read_text())]
    where = acted_on(base)
    options = [*(["--model", args.model] if args.model else []),
               *(["--base-url", args.base_url] if args.base_url else [])]  # fmt: skip
    levers = args.lever or [name for name in where if name not in ALWAYS_ON]
    earlier = json.loads(Path(args.reruns).read_text()) if args.reruns else None
    levers = list(earlier) if earlier is not None else levers
    results: dict[str, list[dict]] = {}
    effects = []
    for lever in levers:
        units = sorted({u for us in where.values() for u in us}) if lever == "auto" else \
            where.get(lever, [])  # fmt: skip
        if earlier is not None:
            rows = earlier[lever]
        else:
            print(f"{lever}: {len(units)} to run again", flush=True)
            rows = (
                rerun(units, "auto" if lever == "auto" else f"-{lever}", options) if units else []
            )
        results[lever] = rows
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if lever == "auto":
            same = sum(
                b["solved"] == r["solved"] and b["answer"] == r["answer"]
                for r in rows for b in base if b["task"] == r["task"]
            )  # fmt: skip
            print(f"control: {same}/{len(rows)} reruns gave the baseline's answer", flush=True)
        else:
            effects.append(effect(lever, base, rows))
            print(effects[-1].line(), flush=True)
    print()
    print(f"{len(base)} questions, {sum(r['solved'] for r in base)} right in the baseline")
    for e in sorted(effects, key=lambda e: (e.net, -e.sent_back_right)):
        print(e.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
