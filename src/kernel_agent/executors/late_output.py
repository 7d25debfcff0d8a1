"""Output a kernel publishes after its ``idle``: the window a cell stays open for it.

ipykernel flushes a cell's stdout and stderr before it publishes ``idle``. Other kernels
do not promise that: Deno's reads the cell's stdout from a pipe in a task of its own and
publishes what it read whenever that task runs, so under load the last lines of a cell
come after ``idle`` and ``execute_reply`` (measured here: in 27 of 40 quiet runs of a
five-line cell, some lines came after ``idle``). Those lines still carry the cell's
``msg_id`` as their parent. A cell of such a kernel ends only once its iopub has been
quiet for :data:`QUIET_S` after ``idle`` and reply, and at most :data:`MAX_S` after them
(a kernel whose timers keep printing cannot hold the cell open).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QUIET_S", "MAX_S", "LateOutput", "window_for"]

#: how long a finished cell's iopub must stay quiet before the cell ends
QUIET_S = 0.1
#: the longest a finished cell stays open for late output
MAX_S = 1.0


def window_for(kernel_info: dict[str, object]) -> float:
    """The quiet window for a kernel, from its kernel_info reply: none for ipykernel
    (its ``implementation`` is ``ipython``), :data:`QUIET_S` for every other kernel."""
    return 0.0 if kernel_info.get("implementation") == "ipython" else QUIET_S


@dataclass
class LateOutput:
    """The window after a cell's ``idle`` and reply in which its output still counts."""

    quiet_s: float
    opened_at: float | None = None
    last_at: float = 0.0

    def open(self, now: float) -> LateOutput:
        """The cell's idle and reply have both come (at ``now``)."""
        if self.opened_at is None:
            self.opened_at = self.last_at = now
        return self

    def heard(self, now: float) -> None:
        """A message for the cell came at ``now``."""
        self.last_at = now

    def closes_at(self) -> float:
        """When the cell ends, if nothing more comes for it (only once open)."""
        assert self.opened_at is not None
        return min(self.last_at + self.quiet_s, self.opened_at + MAX_S)
