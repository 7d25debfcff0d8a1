"""``set_result(data, files=[...])``: the run's structured result and its output files.

Checked when the kernel declares them, so the code hears at once what is refused:
the data must be JSON of bounded size; a file is a relative path inside the kernel's
work dir, a regular file reached without symlinks, with no component that starts with
``.`` (content, not configuration: a ``.git/config`` can run code), under a size bound,
and at most so many of them. At the end of the run they come back as content
(:func:`kernel_agent.edges.delivery.deliver`): inside the run's archive, and, when a file is
inert data (a flat name with a data suffix), loose in ``<notebook>_files/result/``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..edges.safefs import dot_component, open_beneath, split_relative
from ..errors import ToolError, UnsafePath

__all__ = ["ResultLimits", "DeclaredResult"]


@dataclass(frozen=True)
class ResultLimits:
    max_data_bytes: int = 1_000_000
    max_files: int = 20
    max_file_bytes: int = 50 * 1024 * 1024


@dataclass
class DeclaredResult:
    """The last ``set_result`` of a run (a later call replaces an earlier one)."""

    limits: ResultLimits = field(default_factory=ResultLimits)
    data: Any = None
    files: list[str] = field(default_factory=list)
    declared: bool = False

    def declare(self, data: Any, files: list[str], work: Path) -> dict[str, Any]:
        """Check and keep ``data`` and ``files``; raise :class:`ToolError` to refuse."""
        try:
            size = len(json.dumps(data))
        except (TypeError, ValueError) as exc:
            raise ToolError(f"set_result: the data is not JSON-serialisable: {exc}") from None
        if size > self.limits.max_data_bytes:
            raise ToolError(
                f"set_result: the data is {size} bytes as JSON, over the "
                f"{self.limits.max_data_bytes} byte bound"
            )
        if len(files) > self.limits.max_files:
            raise ToolError(f"set_result: at most {self.limits.max_files} files, got {len(files)}")
        checked = [self._check(name, work) for name in files]
        self.data, self.files, self.declared = data, checked, True
        return {"data_bytes": size, "files": checked}

    def _check(self, name: str, work: Path) -> str:
        try:
            rel = "/".join(split_relative(name))
            dot = dot_component(rel)
            if dot is not None:
                raise UnsafePath(f"{dot} is a dot name: files are content, not configuration")
            fd = open_beneath(work, rel)
        except UnsafePath as exc:
            raise ToolError(f"set_result: refused {name!r}: {exc}") from None
        except FileNotFoundError:
            raise ToolError(f"set_result: no file {name!r} in the work dir") from None
        except OSError as exc:
            raise ToolError(f"set_result: cannot read {name!r}: {exc.strerror}") from None
        try:
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > self.limits.max_file_bytes:
            raise ToolError(
                f"set_result: {name!r} is {size} bytes, over the "
                f"{self.limits.max_file_bytes} byte bound"
            )
        return rel
