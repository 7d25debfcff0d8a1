"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeLLM


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A scripted OpenAI-compatible server on 127.0.0.1; see ``tests/fake_openai.py``."""
    with FakeLLM() as server:
        yield server
