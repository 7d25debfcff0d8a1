"""A ``kernel_info_request`` sent behind a quiet cell: how a gateway executor learns that
the end of the cell was lost, or that the kernel behind it was restarted."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["QUIET_S", "FollowUp"]

#: a cell with no message for this long gets a kernel_info sent behind it (see FollowUp)
QUIET_S = 1.0
#: an unanswered follow-up is sent again after this long, then twice as long, up to a minute
#: (one sent to a kernel that was then restarted is never answered)
RESEND_S = 5.0
RESEND_MAX_S = 60.0
#: how long iopub may stay silent once the shell has answered a later request
IOPUB_GRACE_S = 2.0


@dataclass
class FollowUp:
    """A ``kernel_info_request`` sent behind a quiet cell, and what came back for it.

    The kernel runs shell requests in order, so its reply comes after the cell's
    ``execute_reply``; the kernel publishes on one iopub socket, so its status comes
    after the cell's ``idle``. Seeing its answers first means the cell's own end is lost.
    """

    msg_id: str
    answered_at: float | None = None  # when its kernel_info_reply arrived
    published: bool = False  # one of its iopub messages arrived
    sent_at: float = field(default_factory=time.monotonic)
    resend_after: float = RESEND_S
    earlier: list[str] = field(default_factory=list)  # ids of the sends it replaced

    def due(self, now_: float) -> bool:
        """True when it has gone unanswered long enough to be sent again."""
        return self.answered_at is None and now_ - self.sent_at >= self.resend_after

    def resent(self, msg_id: str) -> None:
        self.earlier.append(self.msg_id)
        self.msg_id, self.sent_at = msg_id, time.monotonic()
        self.resend_after = min(self.resend_after * 2, RESEND_MAX_S)

    def ids(self) -> list[str]:
        return [*self.earlier, self.msg_id]

    def feed(self, msg: dict[str, Any]) -> None:
        if msg["channel"] == "shell":
            self.answered_at = self.answered_at or time.monotonic()
        elif msg["channel"] == "iopub":
            self.published = True

    def cell_end_lost(self, reply: bool, now_: float) -> bool:
        """True once the cell's missing reply (``reply`` False) or idle can no longer come."""
        if reply and self.published:
            return True  # the cell's idle would have come before this status
        if self.answered_at is None:
            return False
        if not reply:
            return True  # the kernel answered this first, so it never got the cell
        return now_ - self.answered_at >= IOPUB_GRACE_S  # iopub has gone silent
