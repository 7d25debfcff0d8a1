"""A warm pool of pre-started kernels, so a new session costs a hand-off, not a kernel start.

A pooled kernel is fresh: it is started, answers ``kernel_info``, and is handed out
once. Nothing ever runs user code in it before the hand-off, and a kernel that
served a session is stopped with it, never returned here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..executors.base import AsyncExecutor
from ..settings import Settings

__all__ = ["WarmPool"]

log = logging.getLogger(__name__)


class WarmPool:
    """Keeps ``size`` started kernels built from ``settings``; refills one at a time."""

    def __init__(self, settings: Settings, size: int) -> None:
        self.settings = settings
        self.size = size
        self._ready: list[AsyncExecutor] = []
        self._filler: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def ready(self) -> int:
        return len(self._ready)

    def matches(self, settings: Settings) -> bool:
        """Whether a session with ``settings`` may take a pooled kernel."""
        return (settings.kernel_name, settings.sandbox, settings.cwd) == (
            self.settings.kernel_name, self.settings.sandbox, self.settings.cwd,
        )  # fmt: skip

    def start(self) -> None:
        self._kick()

    def take(self) -> AsyncExecutor | None:
        """A started kernel, or None when the pool is empty (the caller starts one)."""
        item = self._ready.pop(0) if self._ready else None
        self._kick()
        return item

    def _kick(self) -> None:
        if self.size > 0 and not self._closed and (self._filler is None or self._filler.done()):
            self._filler = asyncio.ensure_future(self._fill())

    async def _fill(self) -> None:
        from ..executors.factory import make_executor

        while not self._closed and len(self._ready) < self.size:
            executor = make_executor(self.settings)
            try:
                await executor.start()
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    await executor.shutdown()
                if not isinstance(exc, Exception):
                    raise
                log.warning("warm pool: a kernel did not start: %s", exc)  # a session will say why
                return
            if self._closed:
                await executor.shutdown()
                return
            self._ready.append(executor)

    async def wait_full(self, timeout: float = 60) -> None:
        """Until the pool holds ``size`` kernels (tests, benchmarks)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self._ready) < self.size and asyncio.get_running_loop().time() < deadline:
            self._kick()
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        self._closed = True
        if self._filler is not None:
            self._filler.cancel()
            with contextlib.suppress(BaseException):
                await self._filler
        ready, self._ready = self._ready, []
        for executor in ready:
            with contextlib.suppress(Exception):
                await executor.shutdown()
