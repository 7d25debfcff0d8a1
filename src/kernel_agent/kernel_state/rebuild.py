"""After a kernel restart: replay the cells that built the state, and say what survived."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..events import Event, Notice, StateRebuilt
from .namespace import VariableInfo, parse_summary

if TYPE_CHECKING:
    from .state import KernelState

__all__ = ["Rebuild", "rebuild_state"]


@dataclass
class Rebuild:
    """What a rebuild produced: a note for the model and the namespace after it."""

    note: str = ""
    namespace: dict[str, VariableInfo] = field(default_factory=dict)


async def rebuild_state(
    state: KernelState, lost: dict[str, VariableInfo], out: Rebuild, *, replay: bool = True
) -> AsyncIterator[Event]:
    """Replay ``state.state_cells`` (code, seconds) in order if ``replay`` and the
    settings' ``rebuild_state`` are on.

    Cells slower than ``settings.rebuild_max_cell_s`` are skipped; replays go into the
    transcript marked ``replay: true``. ``state.state_cells`` becomes the cells that now
    live in the kernel. ``lost`` is the namespace before the restart.
    """
    settings = state.settings
    cells = list(state.state_cells)
    state.state_cells.clear()
    replayed = skipped = 0
    started = time.monotonic()
    if replay and settings.rebuild_state and cells:
        yield Notice(
            f"kernel restarted: rebuilding its state by replaying {len(cells)} cells", "warning"
        )
        for code, duration in cells:
            if duration > settings.rebuild_max_cell_s:
                skipped += 1
                continue
            result = await state.execute(code)
            state.replayed(result)
            if not result.ok:
                break
            replayed += 1
            state.state_cells.append((code, result.duration))
            out.namespace = parse_summary(result.user_expressions.get("ns")) or out.namespace
        yield StateRebuilt(replayed, skipped, time.monotonic() - started)
    survived = sorted(k for k in lost if k in out.namespace)
    gone = sorted(k for k in lost if k not in out.namespace)
    if replayed:
        slow = f" ({skipped} slow cells skipped)" if skipped else ""
        out.note = (
            f"The kernel was restarted and its state rebuilt by replaying {replayed} "
            f"earlier cells{slow}. "
            f"Variables that survived: {', '.join(survived) or 'none'}. "
            f"Gone: {', '.join(gone) or 'none'}."
        )
    else:
        out.note = "The kernel was restarted: every variable and import is gone" + (
            f" ({', '.join(gone)})." if gone else "."
        )
    state.note(f"*kernel-agent: {out.note}*")
    yield Notice(out.note, "warning")
