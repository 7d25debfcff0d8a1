"""What local and gateway kernels do alike: :class:`KernelProtocolExecutor`.

Both speak the Jupyter messaging protocol to a kernel: they send an
``execute_request`` and collect its messages until ``idle`` + ``execute_reply``
arrive. The base owns what that has in common: the ``execute`` preamble, the code
injected silently at every (re)start, the routing of a cell's iopub messages (output,
comm, status), and the end of a cell: :meth:`KernelProtocolExecutor._finish` turns
the :data:`Outcome` a backend's ``_collect`` reports into a :class:`CellResult` with
the same statuses and the same timeout -> interrupt -> restart policy everywhere.

A backend implements how it reaches the kernel: ``start``/``restart``/``shutdown``/
``interrupt``/``is_alive``, ``_connected``, ``_send_request``, ``_collect``,
``_exit_reason`` and ``send_comm`` (and may override ``_recover_from_death`` and the
``_before_cell``/``_between_cells``/``_forget`` hooks).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar

from ..errors import KernelStartError
from ..notebook.bounds import RunBudget, sane_count
from ..notebook.outputs import DisplayMap, OutputCollector
from ..results import CellError, CellResult, CellStatus
from .base import OutputCallback, check_timeout
from .late_output import window_for
from .messages import user_expressions

__all__ = ["Outcome", "KernelProtocolExecutor", "execute_content", "take_reply", "now"]

#: "ok" / "reply_error": the cell finished; "timeout": the deadline passed;
#: "died": the kernel went away; "lost": the connection dropped and the end of the
#: cell's messages cannot be had (the kernel is alive and idle).
Outcome = Literal["ok", "reply_error", "timeout", "died", "lost"]


def now() -> datetime:
    return datetime.now(timezone.utc)


def take_reply(collector: OutputCollector, content: dict[str, Any]) -> str:
    """Record an ``execute_reply``'s content on ``collector``; return its status.

    The content is the kernel's: a ``user_expressions`` or ``execution_count`` of the
    wrong shape is dropped (and counted as malformed).
    """
    expressions, malformed = user_expressions(content)
    collector.user_expressions = expressions
    count = content.get("execution_count")
    valid_count = sane_count(count) is not None
    if collector.execution_count is None and valid_count:
        collector.execution_count = count
    status = content.get("status", "ok")
    collector.malformed += malformed + (count is not None and not valid_count)
    return status if isinstance(status, str) else "error"


def execute_content(
    code: str, *, silent: bool = False, user_expressions: dict[str, str] | None = None
) -> dict[str, Any]:
    """An ``execute_request``'s content: no stdin, no stop on error; silent code keeps
    no history."""
    return {
        "code": code,
        "silent": silent,
        "store_history": not silent,
        "user_expressions": user_expressions or {},
        "allow_stdin": False,
        "stop_on_error": False,
    }


K = TypeVar("K", bound="KernelProtocolExecutor")


class KernelProtocolExecutor(ABC):
    """The shared part of an executor that drives a kernel over the Jupyter protocol.

    ``startup_timeout`` bounds a start and the silent start-up code;
    ``interrupt_grace`` is how long an interrupted cell may take to stop before the
    kernel is restarted; ``restart_on_death`` brings a kernel that died mid-cell back.
    """

    def __init__(
        self,
        *,
        startup_timeout: float,
        max_output_chars: int,
        interrupt_grace: float,
        restart_on_death: bool,
    ) -> None:
        check_timeout(startup_timeout, "startup timeout")
        self.startup_timeout = startup_timeout
        self.max_output_chars = max_output_chars
        self.interrupt_grace = interrupt_grace
        self.restart_on_death = restart_on_death
        #: The kernelspec dict stored in notebook metadata (name, display_name, language).
        self.kernelspec: dict[str, Any] = {}
        #: The kernel's language_info (from kernel_info_reply); empty until started.
        self.language_info: dict[str, Any] = {}
        #: how long a finished cell waits for output published after its idle (late_output)
        self.late_output_s = 0.0
        self.display_map: DisplayMap = {}
        #: what all the cells of this executor's kernel(s) may keep, restarts included
        self.run_budget = RunBudget.for_outputs(max_output_chars)
        #: code run silently after every (re)start: the host bridge's kernel-side helpers
        self.init_code: str | None = None
        #: called with each comm message the kernel publishes while a cell runs
        self.comm_handler: Callable[[dict[str, Any]], Any] | None = None

    # ----------------------------------------------------------------- what a backend does
    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def interrupt(self) -> None: ...

    @abstractmethod
    async def restart(self) -> None: ...

    @abstractmethod
    async def shutdown(self) -> None: ...

    @abstractmethod
    async def is_alive(self) -> bool: ...

    @property
    @abstractmethod
    def _connected(self) -> bool:
        """True while there is a live connection to send requests on."""

    @abstractmethod
    async def _send_request(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send a shell request; return its msg_id."""

    @abstractmethod
    async def _collect(
        self, msg_id: str, collector: OutputCollector, deadline: float | None
    ) -> Outcome:
        """Feed the messages for ``msg_id`` to ``collector`` until idle + reply."""

    @abstractmethod
    async def _exit_reason(self) -> str:
        """Why the kernel died, for the cell's error ("killed by SIGKILL", ...)."""

    @abstractmethod
    async def send_comm(self, comm_id: str, data: dict[str, Any], subshell_id: str | None) -> None:
        """Send a ``comm_msg`` to the kernel on shell (to ``subshell_id`` if given)."""

    async def _recover_from_death(self) -> bool:
        """Bring a kernel back after it died mid-cell; True if its state was lost."""
        if not self.restart_on_death:
            return False
        await self.restart()
        return True

    async def _before_cell(self) -> bool:
        """Just before a cell is sent; True if the kernel was restarted since the last one."""
        return False

    def _between_cells(self) -> None:
        """After a request's messages are all in (a cell, the start-up code)."""
        return None

    def _forget(self, msg_id: str) -> None:
        """No more messages for ``msg_id`` are wanted."""
        return None

    # ----------------------------------------------------------------- what they share
    async def __aenter__(self: K) -> K:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult:
        """Run ``code`` and return its :class:`CellResult`.

        A cell past ``timeout`` seconds is interrupted (status "timeout"); if the
        interrupt does not stop it within ``interrupt_grace``, the kernel is restarted.
        A kernel that dies mid-cell gives status "died" and, if ``restart_on_death``,
        a fresh kernel for the next cell. ``user_expressions`` are evaluated by the
        kernel after the cell, in the same request; results land in
        ``CellResult.user_expressions``. A kernel restarted since the last cell (a
        gateway's kernel that died while idle) gives ``restarted=True``: the cell ran
        in a fresh kernel.
        """
        check_timeout(timeout)
        if not self._connected:
            await self.start()
        restarted_while_idle = await self._before_cell()
        collector = OutputCollector(
            self.max_output_chars, self.display_map, on_output, run_budget=self.run_budget
        )
        started = now()
        content = execute_content(code, user_expressions=user_expressions)
        msg_id = await self._send_request("execute_request", content)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            outcome = await self._collect(msg_id, collector, deadline)
            result = await self._finish(code, msg_id, collector, started, timeout, outcome)
        finally:
            self._forget(msg_id)
            self._between_cells()
        result.restarted = result.restarted or restarted_while_idle
        return result

    async def inject(self, code: str) -> None:
        """Run ``code`` silently now (if started) and after every restart."""
        self.init_code = code
        if self._connected:
            await self._run_silent(code)
            self._between_cells()

    async def _ready(self, info: dict[str, Any]) -> None:
        """After a (re)start: the kernel's ``language_info`` from its kernel_info reply
        content ``info``, then the start-up code."""
        language_info = info.get("language_info")
        if isinstance(language_info, dict):
            self.language_info = dict(language_info)
        self.late_output_s = window_for(info)
        if self.init_code:
            await self._run_silent(self.init_code)

    async def _run_silent(self, code: str) -> None:
        """Execute ``code`` without an execution count; raise KernelStartError if it fails."""
        msg_id = await self._send_request("execute_request", execute_content(code, silent=True))
        collector = OutputCollector(self.max_output_chars)
        try:
            deadline = time.monotonic() + self.startup_timeout
            outcome = await self._collect(msg_id, collector, deadline)
        finally:
            self._forget(msg_id)
        if outcome != "ok":
            raise KernelStartError(f"the kernel's start-up code failed: {collector.error}")

    def _take_iopub(self, msg: dict[str, Any], collector: OutputCollector, idle: bool) -> bool:
        """Route one of a cell's iopub messages (status, comm, output); return whether
        the kernel is now idle. No kernel message may end the host's run: one that
        fails is counted as malformed."""
        try:
            kind = msg["msg_type"]
            if kind == "status":
                return bool(msg["content"]["execution_state"] == "idle")
            if kind.startswith("comm_"):
                if self.comm_handler is not None:
                    self.comm_handler(msg)
            else:
                collector.feed(msg)
        except Exception:
            collector.malformed += 1
        return idle

    async def _finish(
        self,
        code: str,
        msg_id: str,
        collector: OutputCollector,
        started: datetime,
        timeout: float | None,
        outcome: Outcome,
    ) -> CellResult:
        """The :class:`CellResult` for ``outcome``, interrupting or restarting as needed.

        A timeout interrupts the kernel; if the cell does not stop within
        ``interrupt_grace`` seconds, the kernel is restarted (state lost).
        """
        status: CellStatus = "ok"
        error, restarted = collector.error, False
        if outcome == "reply_error":
            status = "error"
        elif outcome == "timeout":
            status = "timeout"
            await self.interrupt()
            grace = time.monotonic() + self.interrupt_grace
            after = await self._collect(msg_id, collector, grace)
            if after in ("timeout", "died"):
                await self.restart()
                restarted = True
                how = (
                    "the interrupt did not stop it, so the kernel was restarted "
                    "and its state is lost"
                )
            else:
                how = "it was interrupted; kernel state is kept"
            error = CellError("CellTimeoutError", f"cell exceeded its {timeout:g} s timeout: {how}")
        elif outcome == "died":
            status = "died"
            reason = await self._exit_reason()
            error = CellError(
                "DeadKernelError", f"the kernel died while running this cell ({reason})"
            )
            restarted = await self._recover_from_death()
        elif outcome == "lost":
            status = "error"
            error = CellError(
                "ConnectionLost",
                "the connection to the kernel dropped and the end of this cell's output was lost; "
                "the kernel is alive and keeps its state",
            )
        return CellResult(
            code=code,
            status=status,
            execution_count=collector.execution_count,
            outputs=collector.finish(),
            error=error,
            started=started,
            ended=now(),
            restarted=restarted,
            user_expressions=collector.user_expressions,
        )
