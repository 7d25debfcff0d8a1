"""Time the bundled local model: assembly, server start, first token, tokens/s.

    python bench/bench_local_model.py [--threads N] [--batch-threads N] [--runs 3]
                                      [--keep-home DIR]

Assembly is measured into a fresh temp dir (1.1 GB written, then removed) unless
``--keep-home`` points at a cache to reuse. Generation goes through the real ``openai``
client, streamed, at temperature 0.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from openai import OpenAI

from kernel_agent.llm.local_model import BUNDLED_MODEL, ensure_model
from kernel_agent.llm.local_server import LocalModelServer

# different prompts, so llama.cpp's prompt-prefix reuse does not hide the prompt cost
PROMPTS = [
    "Write a Python function factorial(n) and print factorial(10). "
    "Reply with one ```python block only.",
    "Using pandas, load 'sales.csv' and print the mean of the column 'amount' per 'region'. "
    "Reply with one ```python block only.",
    "Print the 20 first prime numbers in Python. Reply with one ```python block only.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="--n_threads (default: llama's)")
    ap.add_argument("--batch-threads", type=int, default=None, help="--n_threads_batch")
    ap.add_argument("--runs", type=int, default=3, help="streamed completions to time")
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--keep-home", type=Path, default=None, help="reuse this cache dir")
    args = ap.parse_args()

    home = args.keep_home or Path(tempfile.mkdtemp(prefix="ka-bench-"))
    try:
        t0 = time.perf_counter()
        path = ensure_model(home)
        print(f"ensure_model (assemble + verify):  {time.perf_counter() - t0:6.2f} s")
        t0 = time.perf_counter()
        ensure_model(home)
        print(f"ensure_model (already verified):   {time.perf_counter() - t0:6.4f} s")

        server = LocalModelServer(
            path,
            model_name=BUNDLED_MODEL.name,
            n_threads=args.threads,
            n_threads_batch=args.batch_threads,
        )
        t0 = time.perf_counter()
        with server:
            print(f"server start -> /v1/models 200:    {time.perf_counter() - t0:6.2f} s")
            client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
            for run in range(1, args.runs + 1):
                stream_once(client, server.model_name, args.max_tokens, run)
    finally:
        if args.keep_home is None:
            shutil.rmtree(home, ignore_errors=True)


def stream_once(client: OpenAI, model: str, max_tokens: int, run: int) -> None:
    t0 = time.perf_counter()
    first = last = 0.0
    chunks = 0
    text = []
    stream = client.chat.completions.create(
        model=model,
        temperature=0,
        max_tokens=max_tokens,
        stream=True,
        messages=[{"role": "user", "content": PROMPTS[(run - 1) % len(PROMPTS)]}],
    )
    for chunk in stream:
        delta = chunk.choices[0].delta.content if chunk.choices else None
        if delta:
            last = time.perf_counter()
            first = first or last
            chunks += 1
            text.append(delta)
    total = time.perf_counter() - t0
    rate = (chunks - 1) / (last - first) if chunks > 1 and last > first else float("nan")
    print(
        f"run {run}: first token {first - t0:5.2f} s, {chunks} tokens in {total:5.2f} s, "
        f"{rate:5.1f} tok/s after the first"
    )
    if run == 1:
        print("  | " + "".join(text).strip().replace("\n", "\n  | "))


if __name__ == "__main__":
    main()
