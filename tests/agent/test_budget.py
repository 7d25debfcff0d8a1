"""Token accounting that is never blank, and budgets that stop a run before a model call.

Runs go through the real openai client to the scripted server and a real kernel; the
local-model test counts with the bundled model's own tokenizer on llama-cpp-python's server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.agent.budget import Budget
from kernel_agent.errors import ConfigError
from kernel_agent.events import RunFinished, Usage, tokens_text
from kernel_agent.frontends.render import summary_line
from kernel_agent.llm.client import Completion, LLMClient
from kernel_agent.llm.stream import Usage as CallUsage
from kernel_agent.llm.tokens import chat_text, estimate
from kernel_agent.notebook.export import provenance_markdown
from kernel_agent.settings import Settings, parse_prices

pytestmark = pytest.mark.timeout(120)


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(fake, tmp_path, **(dict(clean_notebook=False) | kw))


def run(fake: FakeLLM, tmp_path: Path, task: str = "do it", extend=None, **kw):
    with Agent(settings_for(fake, tmp_path, **kw), extend=extend) as agent:
        events = list(agent.run(task))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result


def read_nb(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


# -- token accounting ------------------------------------------------------------------


def test_a_stream_without_usage_is_estimated_and_labelled(tmp_path):
    with FakeLLM(stream_usage=False) as fake:
        fake.enqueue(run_cell("print(6 * 7)"), text("It is 42."))
        result = run(fake, tmp_path)
    assert all(r["stream_options"] == {"include_usage": True} for r in fake.requests)
    assert result.status == "ok" and result.usage.source == "estimated"
    # the estimate is the length of what was sent and received, four characters a token
    assert 0 < result.usage.completion_tokens < result.usage.prompt_tokens
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens
    line = summary_line(result)
    assert f"~{result.usage.total_tokens:,} tokens" in line and "estimated" in line
    nb = read_nb(result.notebook)
    assert nb.metadata["kernel_agent"]["usage"]["source"] == "estimated"
    code = [c for c in nb.cells if c.cell_type == "code"]
    tokens = code[0].metadata["kernel_agent"]["tokens"]
    assert tokens["total_tokens"] > 0 and tokens["source"] == "estimated"
    assert "estimated" in provenance_markdown(nb)


def test_a_stream_without_usage_is_counted_by_the_servers_tokenizer(tmp_path):
    words = lambda s: len(s.split())  # noqa: E731 - the scripted server's "tokenizer"
    with FakeLLM(stream_usage=False, tokenizer=words) as fake:
        fake.enqueue(text("forty two is the answer"))
        client = LLMClient(settings_for(fake, tmp_path))
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "6*7?"}]

        async def ask():
            async with client:
                items = [item async for item in client.stream_chat(messages)]
            return next(i for i in items if isinstance(i, Completion))

        done = asyncio.run(asyncio.wait_for(ask(), 30))
    prompt, _ = chat_text(messages)
    assert done.usage == CallUsage(words(prompt), 5, words(prompt) + 5, source="counted")
    assert [b["input"] for b in fake.tokenized] == [prompt, "forty two is the answer"]


def test_the_run_sums_counted_usage_and_keeps_the_label(tmp_path):
    with FakeLLM(stream_usage=False, tokenizer=lambda s: len(s)) as fake:
        fake.enqueue(run_cell("x = 1"), text("done"))
        result = run(fake, tmp_path)
    assert result.usage.source == "counted" and result.usage.completion_tokens > len("done")
    assert "counted with the model's tokenizer" in result.usage.text()


def test_usage_labels():
    assert tokens_text({"reported": False}) == "tokens not reported by the endpoint"
    u = Usage(source="") + CallUsage(10, 2, 12)
    assert u.text() == "12 tokens (10 prompt + 2 completion)" and u.reported
    u = u + CallUsage(1, 1, 2, source="estimated")
    assert u.source == "estimated" and u.text().startswith("~14 tokens") and not u.reported
    done = Completion(text="abcdefgh")
    est = estimate([{"role": "user", "content": "x" * 40}], done)
    assert est.completion_tokens == 2 and est.source == "estimated" and est.prompt_tokens > 10


# -- budgets ---------------------------------------------------------------------------


def _three_cells_then_answer(fake: FakeLLM) -> None:
    """Every call reports 100 prompt + 20 completion tokens."""
    replies = [
        run_cell("a = 1\nprint('found a =', a)"),
        run_cell("b = 2\nprint('found b =', b)"),
        run_cell("print(a + b)"),
        text("a + b is 3"),
    ]
    fake.enqueue(*(dataclasses.replace(r, usage=(100, 20)) for r in replies))


def test_token_budget_stops_before_the_call_that_would_cross_it(tmp_path):
    with FakeLLM() as fake:
        _three_cells_then_answer(fake)
        result = run(fake, tmp_path, max_total_tokens=250)
    # 120 after the first call (240 expected after the next: fine), 240 after the second
    assert result.status == "budget" and len(fake.requests) == 2 and len(result.cells) == 2
    assert "--max-total-tokens 250 tokens" in result.answer and "found b = 2" in result.answer
    nb = read_nb(result.notebook)
    run_meta = nb.metadata["kernel_agent"]
    assert run_meta["status"] == "budget"
    assert run_meta["budget"]["limits"] == {"max_total_tokens": 250.0}
    assert run_meta["budget"]["used"]["total_tokens"] == 240
    assert run_meta["budget"]["stopped_by"] == "max_total_tokens"
    answer = [c for c in nb.cells if c.metadata.get("kernel_agent", {}).get("role") == "answer"]
    assert "--max-total-tokens" in answer[0].source


def test_wall_time_budget(tmp_path):
    with FakeLLM() as fake:
        # the cell alone outlasts the budget; the budget outlasts the run's start (its
        # briefing) even on a loaded 2-core machine, where 1 s did not
        fake.enqueue(run_cell("import time; time.sleep(3.2); print('slept')"), text("never"))
        result = run(fake, tmp_path, max_wall_time=3.0)
    assert result.status == "budget" and len(fake.requests) == 1
    assert "--max-wall-time 3.0 s is spent" in result.answer and "slept" in result.answer
    assert read_nb(result.notebook).metadata["kernel_agent"]["budget"]["stopped_by"] == (
        "max_wall_time"
    )


def test_cost_budget_with_a_price_from_settings(tmp_path):
    with FakeLLM() as fake:
        _three_cells_then_answer(fake)
        # 100 in at $1000/M + 20 out at $1000/M = $0.12 a call
        result = run(fake, tmp_path, max_cost=0.2, prices={"test-model": (1000.0, 1000.0)})
    assert result.status == "budget" and len(result.cells) == 1
    assert result.cost == pytest.approx(0.12) and "--max-cost $0.2000" in result.answer
    meta = read_nb(result.notebook).metadata["kernel_agent"]
    assert meta["cost"] == pytest.approx(0.12) and meta["budget"]["used"]["cost"] == 0.12
    assert "$0.1200" in summary_line(result)
    text_ = provenance_markdown(read_nb(result.notebook))
    assert "| Cost | $0.1200" in text_ and "| Budget |" in text_ and "| Time | model " in text_


def test_cost_budget_without_a_price_is_refused_before_the_run(tmp_path):
    with FakeLLM() as fake:
        with pytest.raises(ConfigError, match="--price test-model=IN/OUT"):
            run(fake, tmp_path, max_cost=1.0)
        assert fake.requests == []


def test_an_extended_budget_lets_the_run_finish(tmp_path):
    asked = []

    def extend(stop):
        asked.append(stop.name)
        return True

    with FakeLLM() as fake:
        _three_cells_then_answer(fake)
        result = run(fake, tmp_path, max_total_tokens=250, extend=extend)
    assert result.status == "ok" and result.answer == "a + b is 3" and asked == ["max_total_tokens"]
    assert result.budget == {
        "limits": {"max_total_tokens": 500.0},
        "used": result.budget["used"],
        "extended": 1,
    }
    assert result.budget["used"]["total_tokens"] == 480


def test_cli_asks_to_extend_in_approve_mode_and_stops_on_no(tmp_path):
    with FakeLLM() as fake:
        _three_cells_then_answer(fake)
        nb = tmp_path / "run.ipynb"
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))
        }
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernel_agent",
                "run",
                "--approve",
                "--base-url",
                fake.base_url,
                "--model",
                "test-model",
                "--api-key",
                "sk-test",
                "--sandbox",
                "none",
                "--cwd",
                str(tmp_path),
                "--notebook",
                str(nb),
                "--max-total-tokens",
                "250",
                "--price",
                "test-model=1000/1000",
                "do it",
            ],  # fmt: skip
            input="r\nr\nn\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=90,
        )
    assert proc.returncode == 1, proc.stderr
    assert "extend --max-total-tokens by as much again? [y/N]" in proc.stderr
    assert "status budget · 2 cells · 240 tokens (200 prompt + 40 completion)" in proc.stderr
    assert "$0.2400" in proc.stderr and "(model " in proc.stderr and "kernel " in proc.stderr
    assert "--max-total-tokens 250 tokens" in proc.stdout
    assert read_nb(nb).metadata["kernel_agent"]["status"] == "budget"


def test_budget_units():
    settings = Settings.from_env(env={}, max_total_tokens=100, prices="m=2/4")
    budget = Budget(settings, "m")
    assert budget.check() is None
    budget.record(CallUsage(30, 10, 40), 0.5)
    assert budget.cost == pytest.approx((30 * 2 + 10 * 4) / 1e6)
    assert budget.check() is None  # 40 used, the next call about 40 more: 80 <= 100
    budget.record(CallUsage(40, 10, 50), 0.5)
    stop = budget.check()
    assert stop is not None and stop.used == 90 and stop.next_call == 50
    assert "would be crossed by the next model call" in stop.text()
    assert parse_prices("a=1/2, b-c=0.5/1") == {"a": (1.0, 2.0), "b-c": (0.5, 1.0)}
    with pytest.raises(ConfigError):
        parse_prices("a=1")
    assert Settings(prices="gpt-4o=1/1").price("openai:gpt-4o-2024-08-06") == (1.0, 1.0)
    assert Settings().price("gpt-4o-mini-2024-07-18") == (0.15, 0.60)
    assert Settings().price("unknown-model") is None
    with pytest.raises(ConfigError):
        Settings(max_wall_time=0)


# -- the local model -------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_the_local_model_is_counted_with_its_own_tokenizer(model_home, tmp_path):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("the local model needs llama-cpp-python: pip install -e '.[local]'")
    from kernel_agent.llm.local_server import local_endpoint

    settings = Settings.from_env(
        env={}, model="local", home=model_home, max_tokens=8, local_keep_alive=0
    )
    messages = [
        {"role": "system", "content": "You are a helpful assistant. Answer in one word."},
        {"role": "user", "content": "What colour is the sky on a clear day?"},
    ]
    with local_endpoint(settings) as (base_url, model, key):
        client = LLMClient(
            settings.with_(base_url=base_url, model=model, api_key=key, temperature=0.0)
        )

        async def ask():
            async with client:
                items = [item async for item in client.stream_chat(messages)]
            return next(i for i in items if isinstance(i, Completion))

        streamed = asyncio.run(ask())
        import openai  # llama.cpp reports usage on a plain (not streamed) request

        plain = openai.OpenAI(base_url=base_url, api_key=key).chat.completions.create(
            model=model,
            messages=messages,
            max_tokens=8,
            temperature=0.0,  # type: ignore[arg-type]
        )
    assert streamed.usage is not None and streamed.usage.source == "counted"
    assert plain.usage is not None
    # the prompt as the server templated it, counted by the same tokenizer
    assert streamed.usage.prompt_tokens == plain.usage.prompt_tokens
    assert 0 < streamed.usage.completion_tokens <= 9
