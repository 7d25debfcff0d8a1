"""The names kernel-agent writes into a notebook's metadata, spelled once.

Each cell's record is under ``cell.metadata[NAMESPACE]``; the run's under
``nb.metadata[NAMESPACE]``. One writer puts cells' records there,
:class:`kernel_agent.kernel_state.KernelState`; the readers (:mod:`.clean`,
:mod:`.export`, :mod:`kernel_agent.observe.runs`, the session's text view) use these
names, so a renamed key is an import error, not a silently empty column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "NAMESPACE",
    "STATUS",
    "RESTARTED",
    "REPLAY",
    "ROLE",
    "STEP",
    "LEVER",
    "EXEC_S",
    "GEN_S",
    "TOKENS",
    "STARTED",
    "ENDED",
    "RUNNING",
    "SKIPPED",
    "INTERRUPTED",
    "RESTART",
    "ROLE_TASK",
    "ROLE_ANSWER",
    "ROLE_NOTE",
    "ROLE_BRIEFING",
    "ROLE_PROSE",
    "ROLE_PROVENANCE",
    "cell_meta",
]

#: the key under which kernel-agent's records live (cell and notebook metadata)
NAMESPACE = "kernel_agent"

# ---- keys of a cell's record
#: a code cell's status: the CellResult's (ok, error, timeout, died, ...) or one below
STATUS = "status"
#: true on the cell after which the kernel was restarted (its state, and earlier, is gone)
RESTARTED = "restarted"
#: true on a cell replayed to rebuild the state after a restart
REPLAY = "replay"
#: what a markdown cell is (one of the ROLE_* values)
ROLE = "role"
#: the agent's step number of a code cell
STEP = "step"
#: the lever that skipped a cell or asked again, rewrote a cell or noted its output
LEVER = "lever"
#: the kernel's / the model's seconds for the cell
EXEC_S = "exec_s"
GEN_S = "gen_s"
#: the reply's token counts (the first cell of a reply)
TOKENS = "tokens"
#: when the cell started and ended in the kernel (ISO 8601, ms)
STARTED = "started"
ENDED = "ended"

# ---- statuses kernel-agent writes beside the CellResult's own
#: recorded before it runs (a run that ends mid-cell still shows the code)
RUNNING = "running"
#: not run (the user or a lever skipped it)
SKIPPED = "skipped"
#: the run ended while the cell ran
INTERRUPTED = "interrupted"
#: the marker cell of a restart asked for by a front end
RESTART = "restart"

# ---- roles of markdown cells
ROLE_TASK = "task"
ROLE_ANSWER = "answer"
#: kernel-agent's notes (a rebuild, a reply sent back); left out of the clean notebook
ROLE_NOTE = "note"
#: the data preview before the first reply; left out of the clean notebook
ROLE_BRIEFING = "briefing"
#: the model's prose before a cell (the default for markdown without a role)
ROLE_PROSE = "prose"
#: the header an export adds
ROLE_PROVENANCE = "provenance"


def cell_meta(cell: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's record, or ``{}`` when it has none or one of the wrong shape."""
    metadata = cell.get("metadata")
    meta = metadata.get(NAMESPACE) if isinstance(metadata, Mapping) else None
    return dict(meta) if isinstance(meta, Mapping) else {}
