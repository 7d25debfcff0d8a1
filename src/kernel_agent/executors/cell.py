"""What every kernel-protocol executor does once a cell's messages stop: outcome -> CellResult.

A backend (local kernel, gateway kernel) sends an ``execute_request`` and collects
its messages until ``idle`` + ``execute_reply`` arrive; its ``_collect`` reports an
:data:`Outcome`. :func:`finish_cell` turns that into a :class:`CellResult` with the
same statuses and the same timeout -> interrupt -> restart policy everywhere.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

from ..notebook.outputs import OutputCollector
from ..results import CellError, CellResult
from .messages import user_expressions

__all__ = ["Outcome", "CellBackend", "finish_cell", "take_reply", "now"]

#: "ok" / "reply_error": the cell finished; "timeout": the deadline passed;
#: "died": the kernel went away; "lost": the connection dropped and the end of the
#: cell's messages cannot be had (the kernel is alive and idle).
Outcome = Literal["ok", "reply_error", "timeout", "died", "lost"]


def now() -> datetime:
    return datetime.now(timezone.utc)


class CellBackend(Protocol):
    """What :func:`finish_cell` needs from an executor."""

    interrupt_grace: float

    async def interrupt(self) -> None: ...

    async def restart(self) -> None: ...

    async def _collect(
        self, msg_id: str, collector: OutputCollector, deadline: float | None
    ) -> Outcome: ...

    async def _exit_reason(self) -> str: ...

    async def _recover_from_death(self) -> bool:
        """Bring a kernel back after it died mid-cell; True if its state was lost."""
        ...


def take_reply(collector: OutputCollector, content: dict[str, Any]) -> str:
    """Record an ``execute_reply``'s content on ``collector``; return its status.

    The content is the kernel's: a ``user_expressions`` or ``execution_count`` of the
    wrong shape is dropped (and counted as malformed).
    """
    expressions, malformed = user_expressions(content)
    collector.user_expressions = expressions
    count = content.get("execution_count")
    valid_count = isinstance(count, int) and not isinstance(count, bool) and count >= 0
    if collector.execution_count is None and valid_count:
        collector.execution_count = count
    status = content.get("status", "ok")
    collector.malformed += malformed + (count is not None and not valid_count)
    return status if isinstance(status, str) else "error"


async def finish_cell(
    backend: CellBackend,
    code: str,
    msg_id: str,
    collector: OutputCollector,
    started: datetime,
    timeout: float | None,
    outcome: Outcome,
) -> CellResult:
    """The :class:`CellResult` for ``outcome``, interrupting or restarting as needed.

    A timeout interrupts the kernel; if the cell does not stop within
    ``backend.interrupt_grace`` seconds, the kernel is restarted (state lost).
    """
    status, error, restarted = "ok", collector.error, False
    if outcome == "reply_error":
        status = "error"
    elif outcome == "timeout":
        status = "timeout"
        await backend.interrupt()
        grace = time.monotonic() + backend.interrupt_grace
        after = await backend._collect(msg_id, collector, grace)
        if after in ("timeout", "died"):
            await backend.restart()
            restarted = True
            how = "the interrupt did not stop it, so the kernel was restarted and its state is lost"
        else:
            how = "it was interrupted; kernel state is kept"
        error = CellError("CellTimeoutError", f"cell exceeded its {timeout:g} s timeout: {how}")
    elif outcome == "died":
        status = "died"
        reason = await backend._exit_reason()
        error = CellError("DeadKernelError", f"the kernel died while running this cell ({reason})")
        restarted = await backend._recover_from_death()
    elif outcome == "lost":
        status = "error"
        error = CellError(
            "ConnectionLost",
            "the connection to the kernel dropped and the end of this cell's output was lost; "
            "the kernel is alive and keeps its state",
        )
    return CellResult(
        code=code,
        status=status,  # type: ignore[arg-type]
        execution_count=collector.execution_count,
        outputs=collector.outputs,
        error=error,
        started=started,
        ended=now(),
        restarted=restarted,
        user_expressions=collector.user_expressions,
    )
