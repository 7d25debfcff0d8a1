"""The executor interface every backend implements.

A backend runs code somewhere (a local kernel, a gateway kernel, the current
IPython shell) and reports :class:`~kernel_agent.results.CellResult`s whose
outputs are nbformat NotebookNodes. The async protocol is the real one; sync
facades are generated from it with :func:`kernel_agent.syncify.sync_facade`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..results import CellResult

__all__ = ["AsyncExecutor", "OutputCallback", "check_timeout"]

#: Called with each output NotebookNode as it arrives (for live rendering).
OutputCallback = Any


@runtime_checkable
class AsyncExecutor(Protocol):
    """What the agent needs from a place that runs code."""

    #: The kernelspec dict stored in notebook metadata (name, display_name, language).
    kernelspec: dict[str, Any]
    #: The kernel's language_info (from kernel_info_reply).
    language_info: dict[str, Any]

    async def start(self) -> None: ...

    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult: ...

    async def interrupt(self) -> None: ...

    async def restart(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def is_alive(self) -> bool: ...


def check_timeout(timeout: float | None) -> None:
    """Every executor refuses a cell timeout of zero or less the same way."""
    if timeout is not None and timeout <= 0:
        raise ConfigError(f"timeout must be positive, got {timeout}")
