"""What one task's run knows, and the small decisions the loop acts on. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..results import CellResult

if TYPE_CHECKING:
    from ..events import RunStatus
    from ..kernel_state.namespace import VariableInfo
    from ..kernel_state.preview_facts import FileFacts
    from .budget import Budget

__all__ = ["Ask", "Stop", "TaskState", "Turn"]


@dataclass(frozen=True)
class Ask:
    """Send ``message`` to the model and take another turn (instead of an answer or a cell).

    ``notice`` is shown to the user; ``sampling`` overrides the next reply's sampling
    options; ``cell_meta`` goes into the transcript of a cell that is skipped for it;
    ``failure``: a skipped cell counts towards ``max_consecutive_errors`` (levers that
    bound themselves, like the stall guard, say False); ``rewind``: the conversation goes
    back to the task's start before ``message`` is sent, so the model does not see (and
    copy) the failed attempt again; the kernel keeps its state.
    """

    message: str
    notice: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    cell_meta: Mapping[str, Any] = field(default_factory=dict)
    failure: bool = True
    rewind: bool = False


@dataclass(frozen=True)
class Stop:
    """End the run now with ``status`` and ``answer`` (an honest end instead of more turns)."""

    status: RunStatus
    answer: str
    notice: str | None = None


@dataclass
class Turn:
    """One reply, parsed: the cells it asks to run and the prose around them.

    ``call_ids`` holds one tool-call id per code (empty for fenced code); ``fenced``
    is True when the codes came from fenced blocks in the text.
    """

    codes: list[str]
    prose: str
    call_ids: list[str] = field(default_factory=list)
    fenced: bool = False

    def call_id(self, index: int) -> str | None:
        return self.call_ids[index] if self.call_ids else None


@dataclass
class TaskState:
    """Everything one task's run tracks: the loop's counters and the facts the levers share.

    A lever's own memory is on the lever (each task gets fresh levers,
    :meth:`~.levers.base.Lever.for_task`), not here.
    """

    task: str
    #: cells asked for in this task (run, skipped, repeated); bounded by ``max_steps``
    steps: int = 0
    #: the agent-wide step number of the last cell (numbers cells across tasks)
    step: int = 0
    #: failing cells (or malformed calls) in a row; bounded by ``max_consecutive_errors``
    failures: int = 0
    #: the cells run for this task, in order
    cells: list[CellResult] = field(default_factory=list)
    #: the last non-empty hint for a failing cell (the loop's; push_after_error and
    #: unbacked_answer send it with their asks)
    last_hint: str = ""
    #: the model was pushed to fix a failing cell in this task (push_after_error says so;
    #: unbacked_answer then stops instead of asking again)
    error_pushed: bool = False
    #: sampling overrides for the next reply
    sampling: dict[str, Any] = field(default_factory=dict)
    #: what the kernel can import, ``{import name: version}`` (empty: not probed)
    libraries: dict[str, str] = field(default_factory=dict)
    #: turns in a row that made no progress, a fact several levers share: stall_guard
    #: counts a repeated cell or output (and resets it on progress), no_install a refused
    #: install, prose_cell prose in a cell; stall_guard acts on it
    stalls: int = 0
    #: what this task may spend, and has spent (None: no accounting, as in lever tests)
    budget: Budget | None = None
    #: the lever that composed the final answer from printed values ("": the model's own)
    composed_by: str = ""
    #: the kernel's variables, as the last cell left them
    namespace: dict[str, VariableInfo] = field(default_factory=dict)
    #: notes the levers added to the last cell's output (an answer composed from that cell
    #: waits for the model, which reads them first)
    doubts: list[str] = field(default_factory=list)
    #: the lever that rewrote the cell now running ("": none)
    rewritten_by: str = ""
    #: the conversation's length when the task was sent (where a rewind goes back to)
    history_start: int = 0
    #: what the levers and hints told the model in this task, as sent: the task's notes,
    #: asks, notes and hints under a cell's output (prompt_echo compares answers with them)
    told: list[str] = field(default_factory=list)
    #: the notes sent with the task (the data preview): every word of them is ours, values
    #: included, since none of it is an answer (prompt_echo)
    briefing: list[str] = field(default_factory=list)
    #: what the data preview measured, by file name (data_preview; preflight reads it)
    data_facts: dict[str, FileFacts] = field(default_factory=dict)
    #: the prose the model wrote beside its code in this task, in order (stall_guard ends
    #: a stalled run with the last of it that states values the outputs show)
    said: list[str] = field(default_factory=list)

    @property
    def ran_code(self) -> bool:
        return bool(self.cells)
