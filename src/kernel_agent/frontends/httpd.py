"""The uvicorn server under ``serve`` and ``mcp --http``: a stop that does not wait forever.

On SIGTERM uvicorn closes its sockets, then waits for requests in flight (at most
``timeout_graceful_shutdown`` seconds) before it cancels them. A request waiting on a
cell would then get a plain-text 500, and the cell's output would be lost.
:class:`StoppingServer` first calls ``on_stop`` (interrupt the running cells, so
their requests are answered with what they printed and the notebook keeps it),
then stops the usual way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

__all__ = ["StoppingServer", "argv_secret_warning"]

log = logging.getLogger(__name__)


class StoppingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._on_stop = on_stop

    async def shutdown(self, sockets: Any = None) -> None:
        try:
            await self._on_stop()
        except Exception:  # noqa: BLE001 - stopping goes on whatever happened
            log.exception("while interrupting the running cells")
        await super().shutdown(sockets)


def argv_secret_warning(command: str, flag: str, env: str) -> str:
    """The warning for a secret given on the command line (``/proc/PID/cmdline`` is 0444)."""
    return (
        f"kernel-agent {command}: warning: a token given with {flag} is visible to other users "
        f"of this machine (in the process list); prefer the {env} environment variable"
    )
