"""The bundled local model through our server, against llama.cpp itself in the same run.

    flock /tmp/kernel-agent-model.lock python bench/bench_local_model.py
        [--threads N] [--repeats 3] [--gen-tokens 96] [--assemble] [--no-keep-alive]

Measured in one run, interleaved so the machine's load hits both alike:

1. prompt evaluation and generation tokens/s of a ~1,400-token chat prompt with a
   fresh first token (nothing reused), through our server and the ``openai`` client,
   streamed, temperature 0, against ``llama_cpp.Llama`` loaded in this process on the
   same GGUF with the same threads; the ratios (goal: at least 0.9x both). "Client"
   rates are what a caller sees (prompt tokens / time to first token; tokens after the
   first / their time); "llama" rates are llama.cpp's own counters.
2. generation and prompt evaluation with 1 thread and with 2 (``llama_set_n_threads``);
   then (``--only auto``) generation through our server with its default, threads
   chosen by measured speed, interleaved with llama.cpp in-process at each fixed count.
3. a 3-turn conversation through the server: prompt tokens evaluated per turn against
   the prompt's length (the KV cache of the previous turn is reused); then another
   conversation, then the first again, with llama-cpp-python's RAM prompt cache
   (``cache``) off and on.
4. keep-alive: four separate processes start ``--model local``'s server in turn (a
   5 s keep-alive, a temp state dir); each times start-up to the first token of one
   call with the agent's real system prompt (a fresh sandbox work dir in it, as each
   run has) and a different task, and counts the prompt tokens evaluated: runs 1-2
   as the prompt is today, runs 3-4 with the work dir moved to its end. Then the
   server must exit once idle.

The machine's load (``os.getloadavg``) is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

from kernel_agent.llm.local_model import BUNDLED_MODEL, ensure_model
from kernel_agent.llm.local_server import LocalModelServer, model_settings
from kernel_agent.settings import default_home

SYSTEM = (Path(__file__).resolve().parents[1] / "src/kernel_agent/prompts/system.md").read_text()
TABLE = "\n".join(
    f"{i},2024-{1 + i % 12:02d}-{1 + i % 28:02d},{['north', 'south', 'east', 'west'][i % 4]},"
    f"{(i * 37) % 500 + 0.5},{(i * 13) % 9 + 1}"
    for i in range(60)
)
CONTEXT = (
    "The file `sales.csv` in the working directory holds these rows "
    "(id,date,region,price,units):\n" + TABLE
)
TASK = "What is the mean price per region? Round to 2 decimals."
TASKS = [TASK, "How many rows have more than 5 units?", "Which month has the most units?"]
CELL_OUTPUT = (
    "Cell output:\n```\nregion\neast     251.50\nnorth    246.83\nsouth    255.17\n"
    "west     249.50\nName: price, dtype: float64\n```\nVariables: df (DataFrame 60x5)"
)


def messages(nonce: str = "", task: str = TASK) -> list[dict[str, str]]:
    """A ~1,400-token agent-like prompt; a leading nonce defeats prefix reuse."""
    system = (nonce + "\n" if nonce else "") + SYSTEM + "\n" + CONTEXT
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


# -- 1. our server against llama.cpp in this process ------------------------------------


def stream_rates(chunks: Any, t0: float) -> dict[str, float]:
    first = last = 0.0
    n = 0
    for chunk in chunks:
        delta = chunk["choices"][0]["delta"] if isinstance(chunk, dict) else chunk.choices[0].delta
        content = delta.get("content") if isinstance(delta, dict) else delta.content
        if content:
            last = time.perf_counter()
            first = first or last
            n += 1
    gen = (n - 1) / (last - first) if n > 1 and last > first else float("nan")
    return {"ttft": first - t0, "tokens": n, "gen": gen}


def perf(llama: Any) -> dict[str, float]:
    import llama_cpp

    d = llama_cpp.llama_perf_context(llama._ctx.ctx)
    return {"n_p": d.n_p_eval, "t_p": d.t_p_eval_ms, "n_e": d.n_eval, "t_e": d.t_eval_ms}


def server_perf(server: Any) -> dict[str, float]:
    req = urllib.request.Request(
        server.stats_url, headers={"Authorization": f"Bearer {server.api_key}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        d = json.load(r)
    return {
        "n_p": d["n_p_eval"],
        "t_p": d["t_p_eval_ms"],
        "n_e": d["n_eval"],
        "t_e": d["t_eval_ms"],
    }


def llama_rates(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    n_p, t_p = after["n_p"] - before["n_p"], after["t_p"] - before["t_p"]
    n_e, t_e = after["n_e"] - before["n_e"], after["t_e"] - before["t_e"]
    return {
        "n_prompt": n_p,
        "l_prompt": 1000 * n_p / t_p if t_p else float("nan"),
        "l_gen": 1000 * n_e / t_e if t_e else float("nan"),
    }


def direct_once(llama: Any, gen_tokens: int) -> dict[str, float]:
    before = perf(llama)
    t0 = time.perf_counter()
    out = llama.create_chat_completion(
        messages=messages(uuid.uuid4().hex), max_tokens=gen_tokens, temperature=0, stream=True
    )
    rates = stream_rates(out, t0)
    rates.update(llama_rates(before, perf(llama)))
    rates["prompt"] = rates["n_prompt"] / rates["ttft"]
    return rates


def server_once(client: OpenAI, server: Any, gen_tokens: int) -> dict[str, float]:
    before = server_perf(server)
    t0 = time.perf_counter()
    out = client.chat.completions.create(
        model=server.model_name,
        messages=messages(uuid.uuid4().hex),  # type: ignore[arg-type]
        max_tokens=gen_tokens,
        temperature=0,
        stream=True,
    )
    rates = stream_rates(out, t0)
    rates.update(llama_rates(before, server_perf(server)))
    rates["prompt"] = rates["n_prompt"] / rates["ttft"]
    return rates


def compare(path: Path, threads: int, repeats: int, gen_tokens: int) -> Any:
    from llama_cpp import Llama

    ms = model_settings(path, BUNDLED_MODEL.name, n_threads=threads, n_threads_batch=threads)
    llama = Llama(
        model_path=str(path),
        n_ctx=int(ms["n_ctx"]),  # type: ignore[call-overload]
        n_threads=threads,
        n_threads_batch=threads,
        n_batch=int(ms["n_batch"]),  # type: ignore[call-overload]
        verbose=False,
    )
    server = LocalModelServer(
        path, model_name=BUNDLED_MODEL.name, n_threads=threads, n_threads_batch=threads
    )
    t0 = time.perf_counter()
    server.start()
    print(f"server start -> ready: {time.perf_counter() - t0:.2f} s ({load()})")
    try:
        client = OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
        rows: dict[str, list[dict[str, float]]] = {"llama": [], "server": []}
        for i in range(repeats):
            for kind in ("llama", "server") if i % 2 == 0 else ("server", "llama"):
                r = (
                    direct_once(llama, gen_tokens)
                    if kind == "llama"
                    else server_once(client, server, gen_tokens)
                )
                rows[kind].append(r)
                print(
                    f"  {kind:6} #{i + 1}: {r['n_prompt']:.0f} prompt tokens, first token "
                    f"{r['ttft']:.2f} s; prompt {r['prompt']:.1f} tok/s (llama {r['l_prompt']:.1f})"
                    f", generation {r['gen']:.1f} tok/s (llama {r['l_gen']:.1f}); {load()}"
                )
        print(f"\n{threads} threads, medians of {repeats} ({load()}):")
        print(f"  {'':28}{'server':>9}{'llama':>9}{'ratio':>8}")
        for key, label in [
            ("prompt", "prompt tok/s (client)"),
            ("l_prompt", "prompt tok/s (llama.cpp)"),
            ("gen", "generation tok/s (client)"),
            ("l_gen", "generation tok/s (llama.cpp)"),
        ]:
            s = statistics.median(r[key] for r in rows["server"])
            d = statistics.median(r[key] for r in rows["llama"])
            print(f"  {label:28}{s:9.1f}{d:9.1f}{s / d:7.2f}x")
        return llama, server, client
    except BaseException:
        server.shutdown()
        raise


# -- 2. one thread against two ------------------------------------------------------------


def threads_compare(llama: Any, gen_tokens: int, repeats: int) -> None:
    import llama_cpp

    cores = os.cpu_count() or 1
    print(f"\nthreads (llama.cpp in-process, llama_set_n_threads; {cores} cores):")
    result: dict[int, list[dict[str, float]]] = {}
    for i in range(repeats):
        for n in (1, 2) if i % 2 == 0 else (2, 1):
            llama_cpp.llama_set_n_threads(llama._ctx.ctx, n, n)
            result.setdefault(n, []).append(direct_once(llama, gen_tokens))
    for n, rows in sorted(result.items()):
        p = statistics.median(r["l_prompt"] for r in rows)
        g = statistics.median(r["l_gen"] for r in rows)
        print(f"  {n} thread(s): prompt {p:.1f} tok/s, generation {g:.1f} tok/s")
    print(f"  ({load()})")
    llama_cpp.llama_set_n_threads(llama._ctx.ctx, cores, cores)


# -- 2b. our server choosing its threads, against llama.cpp at each fixed count -----------

SHORT = [
    {"role": "system", "content": "You write Python."},
    {
        "role": "user",
        "content": "Write a function that reads a CSV file of sales and prints the mean "
        "price per region, with comments.",
    },
]


def short_messages() -> list[dict[str, str]]:
    """A ~50-token prompt (a nonce defeats reuse): the time goes to generation."""
    return [
        {"role": "system", "content": uuid.uuid4().hex[:8] + " " + SHORT[0]["content"]},
        SHORT[1],
    ]


def auto_compare(path: Path, repeats: int, gen_tokens: int) -> None:
    """Generation through our server, threads chosen by measured speed (the default),
    interleaved with ``llama_cpp.Llama`` in this process at every fixed count; the same
    sampling (the server's default repeat penalty, 1.1) and the same text."""
    from llama_cpp import Llama

    counts = sorted({1, os.cpu_count() or 1})
    llama = Llama(
        model_path=str(path), n_ctx=8192, n_threads=counts[-1], n_batch=512, verbose=False
    )
    import llama_cpp

    rows: dict[str, list[float]] = {"server": [], **{f"llama {n}": [] for n in counts}}
    with LocalModelServer(path, model_name=BUNDLED_MODEL.name) as server:
        client = OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
        print(f"\ngeneration, {gen_tokens} tokens of a short prompt ({load()}):")
        for i in range(repeats):
            kinds = list(rows) if i % 2 == 0 else list(reversed(rows))
            for kind in kinds:
                t0 = time.perf_counter()
                if kind == "server":
                    out: Any = client.chat.completions.create(
                        model=server.model_name,
                        messages=short_messages(),  # type: ignore[arg-type]
                        max_tokens=gen_tokens,
                        temperature=0,
                        stream=True,
                    )
                else:
                    n = int(kind.split()[1])
                    llama_cpp.llama_set_n_threads(llama._ctx.ctx, n, n)
                    out = llama.create_chat_completion(
                        messages=short_messages(),  # type: ignore[arg-type]
                        max_tokens=gen_tokens,
                        temperature=0,
                        stream=True,
                        repeat_penalty=1.1,
                    )
                rate = stream_rates(out, t0)["gen"]
                rows[kind].append(rate)
                extra = ""
                if kind == "server":
                    st = server_stats(server)
                    extra = f" (threads now {st.get('threads')}, ms/token {st.get('ms_per_token')})"
                print(f"  {kind:9} #{i + 1}: {rate:5.1f} tok/s{extra}; {load()}", flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    best = max(v for k, v in med.items() if k != "server")
    print("  medians: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    for k, v in med.items():
        if k != "server":
            print(f"  server / {k}: {med['server'] / v:.2f}x")
    print(f"  server / the best fixed count: {med['server'] / best:.2f}x ({load()})")


def server_stats(server: Any) -> dict[str, Any]:
    req = urllib.request.Request(
        server.stats_url, headers={"Authorization": f"Bearer {server.api_key}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        found: dict[str, Any] = json.load(r)
    return found


# -- 3. a 3-turn conversation -------------------------------------------------------------


def conversation(client: OpenAI, server: Any, gen_tokens: int) -> None:
    """Three turns of one conversation, then another conversation, then the first again."""
    cache = server.settings.get("cache")
    print(
        f"\nconversation through the server, RAM prompt cache {'on' if cache else 'off'} "
        "(prompt tokens evaluated / prompt length, seconds for the reply):"
    )

    def turn(msgs: list[dict[str, str]], label: str) -> None:
        before = server_perf(server)
        t0 = time.perf_counter()
        reply = client.chat.completions.create(
            model=server.model_name,
            messages=msgs,  # type: ignore[arg-type]
            max_tokens=gen_tokens,
            temperature=0,
        )
        took = time.perf_counter() - t0
        evaluated = server_perf(server)["n_p"] - before["n_p"]
        length = reply.usage.prompt_tokens if reply.usage else 0
        print(f"  {label}: {evaluated:.0f} / {length} tokens, {took:.2f} s ({load()})")
        msgs += [
            {"role": "assistant", "content": reply.choices[0].message.content or ""},
            {"role": "user", "content": CELL_OUTPUT},
        ]

    a = messages(uuid.uuid4().hex)
    for n in range(1, 4):
        turn(a, f"A turn {n}")
    turn(messages(uuid.uuid4().hex), "B turn 1 (another conversation in between)")
    turn(a, "A turn 4")


# -- 4. keep-alive: runs in turn --------------------------------------------------------

CHILD = """
import json, sys, time, urllib.request
from pathlib import Path
from openai import OpenAI
from kernel_agent.llm.local_server import LocalModelServer
msgs = json.loads(sys.stdin.read())
t0 = time.perf_counter()
with LocalModelServer(Path({path!r}), model_name="m", keep_alive={keep!r},
                      state_dir=Path({state!r}), log_dir=Path({state!r})) as s:
    ready = time.perf_counter() - t0
    req = lambda: urllib.request.Request(s.stats_url,
        headers={{"Authorization": f"Bearer {{s.api_key}}"}})
    before = json.load(urllib.request.urlopen(req()))["n_p_eval"]
    c = OpenAI(base_url=s.base_url, api_key=s.api_key, max_retries=0)
    out = c.chat.completions.create(model="m", messages=msgs, max_tokens=8,
                                    temperature=0, stream=True)
    for chunk in out:
        if chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - t0
            break
    for chunk in out:
        pass
    after = json.load(urllib.request.urlopen(req()))["n_p_eval"]
    print(json.dumps({{"ready": ready, "first": first, "evaluated": after - before,
                      "reused": s.reused, "pid": s.pid}}))
"""


def agent_system_prompt(cwd: str, cwd_last: bool) -> str:
    """The agent's real system prompt for a Python kernel; a sandboxed kernel's work dir
    is a fresh temp dir per run. ``cwd_last``: the path moved to the prompt's end."""
    from kernel_agent.prompts import prompt

    text = prompt(
        "system",
        language="python",
        kernel_display="Python 3 (ipykernel)",
        cwd="the working directory named at the end" if cwd_last else cwd,
        how_to_run=prompt("run_fenced", language="python", fence_lang="python"),
        vision_note="",
        data_note=prompt("data_note_python") + "\n",
    )
    return text + (f"\n\nThe working directory is `{cwd}`." if cwd_last else "")


def keep_alive_runs(path: Path, keep: float) -> None:
    state = Path(tempfile.mkdtemp(prefix="ka-bench-state-"))
    code = CHILD.format(path=str(path), keep=keep, state=str(state))
    print(
        f"\nkeep-alive {keep:g} s: runs in separate processes, each with a fresh work dir in "
        "the agent's real system prompt (start -> first token; prompt tokens evaluated):"
    )
    runs = [
        ("cwd in the first sentence (today)", False, TASKS[0]),
        ("cwd in the first sentence (today)", False, TASKS[1]),
        ("cwd moved to the end", True, TASKS[2]),
        ("cwd moved to the end", True, TASKS[0]),
    ]
    pid = None
    try:
        for run, (label, cwd_last, task) in enumerate(runs, 1):
            cwd = f"/tmp/ka-{uuid.uuid4().hex[:8]}/w"
            msgs = [
                {"role": "system", "content": agent_system_prompt(cwd, cwd_last)},
                {"role": "user", "content": task},
            ]
            out = subprocess.run(
                [sys.executable, "-c", code],
                input=json.dumps(msgs),
                capture_output=True,
                text=True,
                timeout=600,
            )
            if out.returncode:
                print(out.stderr[-2000:])
                raise SystemExit(1)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            pid = r["pid"]
            print(
                f"  run {run} ({label}): server {'reused' if r['reused'] else 'started'} in "
                f"{r['ready']:.2f} s, first token at {r['first']:.2f} s, "
                f"{r['evaluated']} prompt tokens evaluated ({load()})"
            )
        t0 = time.perf_counter()
        while pid is not None and os.path.exists(f"/proc/{pid}"):
            if time.perf_counter() - t0 > keep + 30:
                print(f"  the server (pid {pid}) did not exit after {keep + 30:g} s idle")
                os.kill(pid, 15)
                break
            time.sleep(0.2)
        else:
            print(f"  the server exited {time.perf_counter() - t0:.1f} s after the last run")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gen-tokens", type=int, default=96)
    ap.add_argument("--assemble", action="store_true", help="time assembly into a temp dir")
    ap.add_argument("--no-keep-alive", action="store_true", help="skip the two-run test")
    ap.add_argument("--no-cache-run", action="store_true", help="skip the RAM-cache run")
    ap.add_argument("--only", choices=["compare", "threads", "auto", "conversation", "keep-alive"])
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, {load()}")
    if args.assemble:
        home = Path(tempfile.mkdtemp(prefix="ka-bench-"))
        try:
            t0 = time.perf_counter()
            ensure_model(home)
            print(f"ensure_model (assemble + verify): {time.perf_counter() - t0:.2f} s")
        finally:
            shutil.rmtree(home, ignore_errors=True)
    path = ensure_model(default_home())
    if args.only == "keep-alive":
        keep_alive_runs(path, 5.0)
        return
    if args.only == "auto":
        auto_compare(path, args.repeats, args.gen_tokens)
        return
    if args.only == "conversation":
        conversations(path, args.threads, args.gen_tokens, not args.no_cache_run)
        return
    llama, server, client = compare(path, args.threads, args.repeats, args.gen_tokens)
    try:
        if args.only is None:
            conversation(client, server, args.gen_tokens)
    finally:
        server.shutdown()
    if args.only in (None, "threads"):
        threads_compare(llama, args.gen_tokens, args.repeats)
    del llama
    if args.only is None and not args.no_cache_run:
        conversations(path, args.threads, args.gen_tokens, True, skip_plain=True)
    if args.only is None:
        auto_compare(path, args.repeats, args.gen_tokens)
    if args.only is None and not args.no_keep_alive:
        keep_alive_runs(path, 5.0)


def conversations(
    path: Path, threads: int, gen_tokens: int, with_cache: bool, skip_plain: bool = False
) -> None:
    for cache in ([False] if not skip_plain else []) + ([True] if with_cache else []):
        with LocalModelServer(
            path,
            model_name=BUNDLED_MODEL.name,
            n_threads=threads,
            n_threads_batch=threads,
            model_options={"cache": cache},
        ) as server:
            client = OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
            conversation(client, server, gen_tokens)


if __name__ == "__main__":
    main()
