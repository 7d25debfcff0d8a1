"""The thread tuner as a pure unit: a scripted clock stands in for llama.cpp's speed."""

from __future__ import annotations

from kernel_agent.llm.local_threads import ThreadTuner, candidates, install


def run(tuner: ThreadTuner, cost: dict[int, float], tokens: int) -> list[int]:
    used = []
    for _ in range(tokens):
        n = tuner.pick()
        tuner.record(n, cost[n])
        used.append(n)
    return used


def test_candidates() -> None:
    assert candidates(2) == [1, 2] and candidates(8) == [1, 4, 8] and candidates(1) == [1]


def test_it_settles_on_the_faster_count_and_follows_a_change_of_load() -> None:
    tuner = ThreadTuner([1, 2], explore_every=20, probe=3)
    quiet = {2: 0.07, 1: 0.11}  # two threads faster
    used = run(tuner, quiet, 200)
    assert used[:3] == [2, 2, 2] and used[3:6] == [1, 1, 1], "each tried first"
    assert used[6:].count(2) / len(used[6:]) > 0.8 and tuner.best == 2
    busy = {2: 0.8, 1: 0.13}  # the machine got busy: one thread is 6x faster
    used = run(tuner, busy, 600)
    assert tuner.best == 1 and used[-400:].count(2) <= 6, "tries of 2 threads stay rare"
    time_spent = sum(busy[n] for n in used[-400:])
    assert time_spent < 1.06 * 400 * busy[1], "exploring costs about a twentieth at most"
    used = run(tuner, quiet, 800)  # noticed at the next try (within ~20 * probe * 6 tokens)
    assert tuner.best == 2 and used[-100:].count(2) > 80, "back to two when quiet again"


def test_install_sets_threads_per_call_and_times_only_generated_tokens() -> None:
    calls: list[tuple[str, object]] = []

    class FakeLlama:
        def eval(self, tokens: list[int]) -> None:
            calls.append(("eval", len(tokens)))

    llama, now = FakeLlama(), [0.0]

    def clock() -> float:
        now[0] += 0.05
        return now[0]

    tuner = ThreadTuner([1, 2], probe=2)
    install(llama, tuner, lambda _, n, nb: calls.append(("threads", (n, nb))), clock)
    llama.eval([1, 2, 3])  # a prompt: the best known count (none yet: the most threads)
    llama.eval([4])
    llama.eval([5])
    llama.eval([6])  # the second candidate's turn
    assert calls == [
        ("threads", (2, 2)), ("eval", 3), ("eval", 1), ("eval", 1),
        ("threads", (1, 1)), ("eval", 1),
    ]  # fmt: skip
    assert set(tuner.cost) == {1, 2}, "one-token calls are timed; the prompt was not"


def test_the_real_server_measures_each_count_and_reports_it(tmp_path) -> None:
    """The bundled model through our server with its default threads (under the model
    lock): after a short reply both counts have been timed, and the stats say so."""
    import json
    import urllib.request

    import pytest
    from openai import OpenAI
    from test_local_keepalive import require

    from kernel_agent.llm.local_model import BUNDLED_MODEL, ensure_model, find_parts
    from kernel_agent.llm.local_server import LocalModelServer, usable_cores

    if usable_cores() < 2:
        pytest.skip("one core: nothing to choose")
    import importlib.util

    require("llama-cpp-python[server]", importlib.util.find_spec("llama_cpp") is not None)
    try:
        find_parts()
    except Exception:
        require("the bundled model", False)
    from conftest import REPO

    model = ensure_model(REPO / ".kernel_agent_cache")
    with LocalModelServer(model, model_name=BUNDLED_MODEL.name, log_dir=tmp_path) as server:
        client = OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
        reply = client.chat.completions.create(
            model=server.model_name,
            messages=[{"role": "user", "content": "Count from 1 to 30, comma-separated."}],
            max_tokens=16,
            temperature=0,
        )
        assert reply.choices[0].message.content
        req = urllib.request.Request(
            server.stats_url, headers={"Authorization": f"Bearer {server.api_key}"}
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            stats = json.load(r)
    counts = candidates(usable_cores())
    assert stats["threads"] in counts
    assert set(stats["ms_per_token"]) == {str(n) for n in counts}, stats
    assert all(v > 0 for v in stats["ms_per_token"].values())
