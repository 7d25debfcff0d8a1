"""How often the bundled local model solves simple analysis tasks (temperature 0).

Each task has one right answer. A task succeeds when the final answer states it and
some cell output shows it (the answer is tied to what the kernel printed). Prints a
table and the success rate; ``--json`` writes the rows too.

    python bench/eval_local_model.py [--only NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from kernel_agent.agent import Agent
from kernel_agent.settings import Settings

TASKS = [
    ("factorial", "What is 15 factorial?", "1307674368000", None),
    (
        "sum-squares-plot",
        "Make a pandas DataFrame with a column n holding 1 to 10 and a column square "
        "holding n squared. Plot square against n, and tell me the sum of the squares.",
        "385",
        None,
    ),
    ("mean", "What is the mean of the numbers 3, 7, 8, 12 and 20?", "10", None),
    ("primes", "How many prime numbers are there below 100?", "25", None),
    ("even-sum", "What is the sum of all even numbers from 1 to 100 inclusive?", "2550", None),
    (
        "csv-fix",
        "The file data.csv in the working directory has sales figures. "
        "What is the mean of the value column?",
        "10.5",
        "Value,Region\n"
        + "\n".join(f"{i},{'north' if i % 2 else 'south'}" for i in range(1, 21))
        + "\n",
    ),
    (
        "letters",
        "How many times does the letter r appear in the string 'strawberry raspberry'?",
        "6",
        None,
    ),
]


def outputs_text(cells) -> str:
    parts = []
    for cell in cells:
        for out in cell.outputs:
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def contains_number(text: str, number: str) -> bool:
    plain = text.replace(",", "")
    return re.search(rf"(?<![\d.]){re.escape(number)}(?:\.0+)?(?![\d])", plain) is not None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only")
    parser.add_argument("--json")
    parser.add_argument("--model", default="local")
    args = parser.parse_args()
    rows = []
    for name, task, expected, data in TASKS:
        if args.only and args.only != name:
            continue
        work = Path(tempfile.mkdtemp(prefix=f"eval-{name}-"))
        if data:
            (work / "data.csv").write_text(data)
        settings = Settings.from_env(
            model=args.model,
            temperature=0.0,
            cwd=work,
            notebook_dir=work,
            max_steps=8,
            sandbox="none",
        )
        started = time.monotonic()
        with Agent(settings) as agent:
            result = agent.run_to_end(task)
        seconds = time.monotonic() - started
        in_outputs = contains_number(outputs_text(result.cells), expected)
        in_answer = contains_number(result.answer, expected)
        errors = sum(1 for c in result.cells if c.status != "ok")
        rows.append(
            {
                "task": name,
                "ok": in_outputs and in_answer,
                "in_outputs": in_outputs,
                "in_answer": in_answer,
                "cells": len(result.cells),
                "errors": errors,
                "seconds": round(seconds, 1),
                "answer": result.answer[:160],
                "notebook": str(result.notebook),
            }
        )
        print(
            f"{name:18} {'PASS' if rows[-1]['ok'] else 'FAIL'}  cells={len(result.cells)} "
            f"errors={errors} {seconds:5.1f}s  answer={result.answer[:90]!r}",
            flush=True,
        )
    passed = sum(r["ok"] for r in rows)
    print(f"\nsuccess: {passed}/{len(rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
