"""``set_result(files=[...])`` in a remote kernel: checked by name when declared.

The host cannot open a remote kernel's file while its cell runs, so the names are
checked here (the same rules as a remote work dir's files: :mod:`.names`) and the
files themselves when they are pulled after the run (:meth:`.work.RemoteWork.deliver`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..edges.safefs import split_relative
from ..errors import ToolError, UnsafePath
from ..tools.declared import DeclaredResult
from .names import check_name

__all__ = ["declare_remote"]


def declare_remote(result: DeclaredResult, data: Any, files: list[Any]) -> dict[str, Any]:
    """Check and keep ``data`` and the file names on ``result``; :class:`ToolError` refuses."""
    if len(files) > result.limits.max_files:
        raise ToolError(f"set_result: at most {result.limits.max_files} files, got {len(files)}")
    names = []
    for name in files:
        try:
            names.append(check_name("/".join(split_relative(str(name)))))
        except UnsafePath as exc:
            raise ToolError(f"set_result: refused {str(name)!r:.80}: {exc}") from None
    reply = result.declare(data, [], Path("."))
    result.files = names
    return {**reply, "files": names}
