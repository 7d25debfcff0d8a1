"""``auto_import``: a cell using a well-known alias nothing imported runs with the import added.

Which imports are missing is :func:`~..imports.missing_imports`'s (nothing is guessed).
"""

from __future__ import annotations

from ..imports import missing_imports
from ..state import TaskState
from .base import Lever

__all__ = ["AutoImport"]


class AutoImport(Lever):
    """A cell using ``stats.``, ``np.``... that nothing imported runs with the import added."""

    name = "auto_import"

    def rewrite(self, state: TaskState, code: str) -> tuple[str, str] | None:
        lines = missing_imports(
            code,
            earlier=[c.code for c in state.cells],
            variables=set(state.namespace),
            libraries=state.libraries,
        )
        if not lines:
            return None
        # no note to the model: the kernel has the module from now on, and a note made the
        # bundled model send it back as a cell, with the output it read (synthetic tuned half)
        return "\n".join(lines) + "\n" + code, ""
