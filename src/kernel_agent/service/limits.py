"""Admission control: a cap on work running at once, a bounded queue, then "too busy".

The service's errors (``ServiceError`` and its HTTP statuses, ``TooBusy`` among them)
live in :mod:`kernel_agent.errors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..errors import (
    TooBusy,
)

__all__ = [
    "Limiter",
]


class Limiter:
    """At most ``limit`` holders at once; at most ``queue`` more wait; the rest get TooBusy."""

    def __init__(self, limit: int, queue: int) -> None:
        if limit < 1 or queue < 0:
            raise ValueError("limit must be >= 1 and queue >= 0")
        self.limit = limit
        self.queue = queue
        self.running = 0
        self.waiting = 0
        self._sem = asyncio.Semaphore(limit)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.running >= self.limit and self.waiting >= self.queue:
            raise TooBusy(
                f"{self.running} cells or runs are executing and {self.waiting} are queued; "
                "try again later"
            )
        self.waiting += 1
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._sem.release()
