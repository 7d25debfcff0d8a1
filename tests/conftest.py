"""Shared fixtures: one session-wide Python kernel flushed between tests, and fresh kernels.

The kernel's environment is pinned the way Jupyter runs notebooks: a fixed terminal
width (tracebacks and reprs wrap the same everywhere) and matplotlib's inline backend.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeLLM

from kernel_agent.executors.kernel import KernelSession

#: Environment every test kernel gets on top of ours.
PINNED_KERNEL_ENV = {
    "COLUMNS": "80",
    "LINES": "24",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
}


def kernel_env(**extra: str) -> dict[str, str]:
    """Our environment plus :data:`PINNED_KERNEL_ENV` (and ``extra``)."""
    return {**os.environ, **PINNED_KERNEL_ENV, **extra}


@pytest.fixture(scope="session")
def kernel_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel")


@pytest.fixture(scope="session")
def _session_kernel(kernel_workdir: Path) -> Iterator[Any]:
    session = KernelSession("python3", cwd=kernel_workdir, env=kernel_env())
    session.start()
    yield session
    session.shutdown()


@pytest.fixture
def kernel(_session_kernel: Any, kernel_workdir: Path) -> Any:
    """A running python3 :class:`KernelSession` with an empty namespace.

    Shared by the whole test session: don't kill, interrupt or restart it (use
    ``fresh_kernel``), and don't rely on execution counts starting at 1.
    """
    if not _session_kernel.is_alive():
        _session_kernel.restart()
    result = _session_kernel.execute(
        f"%reset -f\nimport os as _os; _os.chdir({str(kernel_workdir)!r}); del _os", timeout=30
    )
    assert result.ok, result.error
    _session_kernel.display_map.clear()
    return _session_kernel


@pytest.fixture
def fresh_kernel(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """A factory of new started kernels, shut down after the test.

    ``fresh_kernel(kernel_name="python3", **session_kwargs)``; ``cwd`` defaults to the
    test's tmp_path and ``env`` to :func:`kernel_env`.
    """
    made: list[Any] = []

    def make(kernel_name: str = "python3", **kwargs: Any) -> Any:
        kwargs.setdefault("cwd", tmp_path)
        kwargs.setdefault("env", kernel_env())
        session = KernelSession(kernel_name, **kwargs)
        made.append(session)
        session.start()
        return session

    yield make
    for session in made:
        session.shutdown()


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


def pytest_configure(config: pytest.Config) -> None:
    """The suite owns its signals: SIGINT and SIGQUIT handled as Python's default, even when
    the run was started with them ignored (a shell's background job ignores both, and
    every process it starts inherits that: a test's Ctrl-C to the CLI then did nothing)."""
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def _sigint_handler_restored() -> Iterator[None]:
    """Each test leaves SIGINT's handler as it found it. In-process timeouts (``%%agent``'s
    executor) need Python's default handler; a test that installs another one (a server
    run in this process, an agent's Ctrl-C handling) must not turn them off for every
    test after it (seen in the full suite: a later in-process timeout never fired)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before and before is not None:
        signal.signal(signal.SIGINT, before)
