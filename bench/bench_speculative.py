"""Prompt lookup decoding (speculative decoding from the prompt) on the bundled model,
against plain llama.cpp decoding measured in the same run.

    flock /tmp/kernel-agent-model.lock python bench/bench_speculative.py
        [--threads N] [--repeats 2] [--gen-tokens 160] [--pred 4,10] [--n-ctx 4096]

llama-cpp-python ships it (``llama_speculative.LlamaPromptLookupDecoding``, the server's
``draft_model``; 0.3.36 needs ``logits_all=True`` passed too: it sizes its score buffer
from the argument, not from the draft model's override, and fails past n_batch). A draft
of up to N tokens is copied from the prompt where the last tokens occur there, and the
model checks the draft in one batch.
Our replies copy a lot (column names from the data preview, a failing cell rewritten
with one change), so it could pay. Two costs: llama-cpp-python turns ``logits_all`` on
for it (the logits of every prompt token are computed and kept: memory and prompt
time), and a rejected draft is wasted work.

Three agent-like prompts, each greedy (temperature 0, so both must give the same
tokens): a first cell from a data preview; a failing cell to fix (KeyError, one
character to change); an answer to compose from a printed output. For each: wall time
to the end of the reply, tokens, and the ratio plain/speculative (above 1: faster),
interleaved so the machine's load hits both alike. Also each model's RSS growth.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from kernel_agent.llm.local_model import BUNDLED_MODEL, ensure_model
from kernel_agent.llm.local_server import model_settings
from kernel_agent.settings import default_home

SYSTEM = (Path(__file__).resolve().parents[1] / "src/kernel_agent/prompts/system.md").read_text()

PREVIEW = (
    "The file `cars.csv` (398 rows) has columns: 'Model Year', 'Miles per Gallon', "
    "'Horse Power', 'Weight in lbs', 'Origin Country', 'Number of Cylinders', "
    "'Acceleration (0-60)'.\nFirst rows:\n"
    "Model Year,Miles per Gallon,Horse Power,Weight in lbs,Origin Country,"
    "Number of Cylinders,Acceleration (0-60)\n"
    "1970,18.0,130,3504,USA,8,12.0\n1970,15.0,165,3693,USA,8,11.5\n"
    "1971,24.0,95,2372,Japan,4,15.0\n1972,26.0,88,2100,Europe,4,14.5\n"
)
FIRST = "What is the average 'Miles per Gallon' per 'Origin Country' for cars with 'Number of Cylinders' equal to 4 and 'Model Year' after 1975? Also the median 'Horse Power' of the same cars. Round to 2 decimals."  # noqa: E501
FAILED_CELL = (
    "```python\nimport pandas as pd\ndf = pd.read_csv('cars.csv')\n"
    "four = df[(df['Number of Cylinders'] == 4) & (df['Model Year'] > 1975)]\n"
    "print(four.groupby('Origin Country')['Miles per Galon'].mean().round(2))\n"
    "print(four['Horse Power'].median())\n```"
)
ERROR = (
    "Output of cell [1] (error):\nKeyError: 'Miles per Galon'\n"
    "Hint: the frame has 'Miles per Gallon'. Send the corrected cell."
)
PRINTED = (
    "Output of cell [2] (ok):\nOrigin Country\nEurope    31.32\nJapan     33.64\n"
    "USA       29.10\nName: Miles per Gallon, dtype: float64\n78.0\n"
    "Now give the final answer as text, with each value in its slot: "
    "@mpg_europe[...] @mpg_japan[...] @mpg_usa[...] @median_hp[...]"
)


def prompts(nonce: str) -> dict[str, list[dict[str, str]]]:
    system = {"role": "system", "content": nonce + "\n" + SYSTEM + "\n" + PREVIEW}
    first = {"role": "user", "content": FIRST}
    return {
        "first cell": [system, first],
        "fix a cell": [
            system,
            first,
            {"role": "assistant", "content": FAILED_CELL},
            {"role": "user", "content": ERROR},
        ],  # fmt: skip
        "answer": [
            system,
            first,
            {"role": "assistant", "content": FAILED_CELL},
            {"role": "user", "content": PRINTED},
        ],  # fmt: skip
    }


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def once(llama: Any, msgs: list[dict[str, str]], gen_tokens: int) -> tuple[float, str, int]:
    t0 = time.perf_counter()
    out = llama.create_chat_completion(messages=msgs, max_tokens=gen_tokens, temperature=0)
    dt = time.perf_counter() - t0
    text = out["choices"][0]["message"]["content"] or ""
    return dt, text, int(out["usage"]["completion_tokens"])


def main() -> None:
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--gen-tokens", type=int, default=160)
    ap.add_argument("--pred", default="4,10", help="draft lengths to try")
    ap.add_argument("--n-ctx", type=int, default=4096)
    args = ap.parse_args()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, load {load}")
    path = ensure_model(default_home())
    ms = model_settings(
        path, BUNDLED_MODEL.name, n_ctx=args.n_ctx, n_threads=args.threads,
        n_threads_batch=args.threads,
    )  # fmt: skip
    keys = ("n_ctx", "n_threads", "n_threads_batch", "n_batch", "use_mlock", "verbose")
    kw = {k: ms[k] for k in keys}
    r0 = rss_mb()
    plain = Llama(model_path=str(path), **kw)
    r1 = rss_mb()
    drafts = {
        n: Llama(
            model_path=str(path),
            draft_model=LlamaPromptLookupDecoding(num_pred_tokens=n),
            logits_all=True,
            **kw,
        )  # fmt: skip
        for n in (int(x) for x in args.pred.split(","))
    }
    r2 = rss_mb()
    print(f"peak RSS: plain model +{r1 - r0:.0f} MB; {len(drafts)} speculative models "
          f"(logits_all on) +{r2 - r1:.0f} MB")  # fmt: skip
    times: dict[tuple[str, str], list[float]] = {}
    same = True
    for rep in range(args.repeats):
        for name, msgs in prompts(uuid.uuid4().hex[:8]).items():
            dt, ref, n = once(plain, msgs, args.gen_tokens)
            times.setdefault((name, "plain"), []).append(dt)
            for pred, llama in drafts.items():
                dt2, text, n2 = once(llama, msgs, args.gen_tokens)
                times.setdefault((name, f"pld{pred}"), []).append(dt2)
                same = same and text == ref
            if rep == 0:
                print(f"  {name}: {n} tokens")
    print(f"peak RSS after the runs: {rss_mb():.0f} MB; identical greedy replies: {same}")
    print(f"{'prompt':<12} {'plain s':>8} " + " ".join(f"{k:>14}" for k in
          (f"pld{p} s (x)" for p in drafts)))  # fmt: skip
    for name in prompts("").keys():
        base = statistics.median(times[(name, "plain")])
        cols = []
        for pred in drafts:
            t = statistics.median(times[(name, f"pld{pred}")])
            cols.append(f"{t:8.2f} ({base / t:.2f}x)")
        print(f"{name:<12} {base:8.2f} " + " ".join(f"{c:>14}" for c in cols))


if __name__ == "__main__":
    main()
