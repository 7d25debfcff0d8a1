"""``preflight``: a cell gets what the data preview measured written into it before it runs.

The corrections are :func:`~..preflight.preflight`'s (column names, the read call, numbers
stored as text, filter values, the date format...); this lever applies them.
"""

from __future__ import annotations

from ..preflight import preflight
from ..state import TaskState
from .base import Lever

__all__ = ["Preflight"]


class Preflight(Lever):
    """A cell gets the preview's column names, read call and date format before it runs."""

    name = "preflight"

    def rewrite(self, state: TaskState, code: str) -> tuple[str, str] | None:
        if not state.libraries:  # a Python kernel's preview only (it is probed there)
            return None
        fixed = preflight(
            code,
            state.data_facts,
            state.namespace,
            earlier=[c.code for c in state.cells],
            scipy=state.libraries.get("scipy", ""),
        )
        # no note, as auto_import gives none: a note is sent back as a cell by the small model
        return (fixed, "") if fixed != code else None
