"""Admission control: a cap on work running at once, a bounded queue, then "too busy".

ServiceError            base: an HTTP status and a one-line message
├── NotFound            404: no such session, run or file
├── Ended               409: the session has ended (its notebook and files stay readable)
├── Deleted             410: the session was deleted while the request waited on it
├── TooLarge            413: a file or the session's disk use over its limit
├── TooBusy             429: over --max-sessions, or --max-concurrent with a full queue
└── Stopping            503: the server is stopping
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..errors import KernelAgentError

__all__ = [
    "ServiceError",
    "NotFound",
    "Ended",
    "Deleted",
    "TooLarge",
    "TooBusy",
    "Stopping",
    "Limiter",
]


class ServiceError(KernelAgentError):
    status = 500


class NotFound(ServiceError):
    status = 404


class Ended(ServiceError):
    status = 409


class Deleted(ServiceError):
    status = 410


class Stopping(ServiceError):
    status = 503


class TooLarge(ServiceError):
    status = 413


class TooBusy(ServiceError):
    """Over a limit; ``retry_after`` (seconds) goes into the ``Retry-After`` header."""

    status = 429

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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
