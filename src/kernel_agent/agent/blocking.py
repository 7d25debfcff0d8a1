"""The blocking face of :class:`~.loop.AsyncAgent`: the same loop on a background event
loop, with ``run()`` a plain iterator and ``run_to_end()``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..events import Event, RunFinished, RunResult
from ..notebook.transcript import Transcript
from ..settings import Settings
from ..syncify import BackgroundLoop
from .loop import AsyncAgent

__all__ = ["Agent"]


class Agent:
    """The blocking face of :class:`AsyncAgent`: ``run()`` iterates events; ``run_to_end()``.

    ``with Agent(settings) as agent: result = agent.run_to_end("...")``. ``loop`` is a
    :class:`~kernel_agent.syncify.BackgroundLoop` to run on (one an executor was started
    on before, so its connections live where the agent runs); the agent closes it.
    """

    def __init__(
        self, settings: Settings | None = None, *, loop: BackgroundLoop | None = None, **kwargs: Any
    ) -> None:
        self._bg = loop or BackgroundLoop()
        self.aio = AsyncAgent(settings, **kwargs)

    def run(self, task: str) -> Iterator[Event]:
        return self._bg.iterate(self.aio.run(task))

    def run_to_end(self, task: str) -> RunResult:
        finished = None
        for event in self.run(task):
            if isinstance(event, RunFinished):
                finished = event.result
        assert finished is not None
        return finished

    @property
    def transcript(self) -> Transcript | None:
        return self.aio.transcript

    def close(self) -> None:
        try:
            self._bg.run(self.aio.close())
        finally:
            self._bg.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
