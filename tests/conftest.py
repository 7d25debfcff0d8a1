"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeLLM


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A scripted OpenAI-compatible server on 127.0.0.1; see ``tests/fake_openai.py``."""
    with FakeLLM() as server:
        yield server


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def model_home() -> Path:
    """Where tests keep the assembled local model: once per checkout, git-ignored."""
    return REPO / ".kernel_agent_cache"
