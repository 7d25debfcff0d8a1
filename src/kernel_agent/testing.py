"""Test doubles for code built on kernel-agent: a scripted executor, no kernel needed.

``FakeExecutor`` implements :class:`~kernel_agent.executors.base.AsyncExecutor`, so an
:class:`~kernel_agent.agent.Agent` or a :class:`~kernel_agent.session.Session` runs on
it unchanged, in milliseconds::

    from kernel_agent.testing import FakeCell, FakeExecutor

    executor = FakeExecutor(FakeCell(stdout="42\\n"), FakeCell(error=("NameError", "x")))
    with Agent(settings, executor=executor) as agent:
        agent.run_to_end("...")
    assert executor.codes == ["print(6 * 7)", "x"]

Each non-empty cell takes the next scripted :class:`FakeCell` (a plain "ok" with no
output once the script is used up) and nothing is really run. An empty cell (the
agent's namespace probe after an error) takes nothing from the script.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import new_output

from .executors.base import Isolation, OutputCallback, check_timeout
from .results import CellError, CellResult, CellStatus

__all__ = ["FakeCell", "FakeExecutor"]

#: the error a kernel executor reports with these statuses
_STATUS_ERRORS = {
    "timeout": ("CellTimeoutError", "cell exceeded its timeout"),
    "died": ("DeadKernelError", "the kernel died"),
}


@dataclass
class FakeCell:
    """What one scripted cell "prints": ``stdout``, a ``result`` (its ``text/plain``),
    an ``error`` as (ename, evalue), or another ``status`` ("timeout", "died").

    ``user_expressions`` is what the kernel would send back for them (name -> bundle).
    """

    stdout: str = ""
    result: str | None = None
    error: tuple[str, str] | None = None
    status: CellStatus | None = None
    restarted: bool = False
    user_expressions: dict[str, Any] = field(default_factory=dict)


class FakeExecutor:
    """An executor that answers each cell from a script; see the module docstring.

    ``cwd`` is the user's directory the "kernel" sees and ``kernel_cwd`` the one it
    writes in (default: ``cwd``; a sandboxed kernel has a private one). None for both:
    a kernel without local files, as on a gateway. ``language`` names its language.
    """

    def __init__(
        self,
        *script: FakeCell,
        cwd: str | Path | None = None,
        kernel_cwd: str | Path | None = None,
        language: str = "python",
    ) -> None:
        self.script: deque[FakeCell] = deque(script)
        #: the code of every cell asked for, in order (not the empty requests that only
        #: evaluate ``user_expressions``: those are probes, listed in :attr:`probes`)
        self.codes: list[str] = []
        self.probes: list[dict[str, str]] = []
        self.kernelspec: dict[str, Any] = {
            "name": f"fake-{language}",
            "display_name": f"Fake {language}",
            "language": language,
        }
        self.language_info: dict[str, Any] = {}
        self._language = language
        self._cwd = Path(cwd) if cwd is not None else None
        self._kernel_cwd = Path(kernel_cwd) if kernel_cwd is not None else self._cwd
        self._count = 0
        self.alive = False
        self.interrupts = 0
        self.restarts = 0

    def add(self, *cells: FakeCell) -> None:
        """Script more cells."""
        self.script.extend(cells)

    @property
    def cwd(self) -> Path | None:
        return self._cwd

    @property
    def kernel_cwd(self) -> Path | None:
        return self._kernel_cwd

    @property
    def isolation(self) -> Isolation:
        return Isolation("none", "scripted: nothing runs", "none (fake executor)")

    def make_launcher(self) -> None:
        return None

    async def start(self) -> None:
        self.language_info = {"name": self._language, "version": "0"}
        self.alive = True

    async def shutdown(self) -> None:
        self.alive = False

    async def is_alive(self) -> bool:
        return self.alive

    async def interrupt(self) -> None:
        self.interrupts += 1

    async def restart(self) -> None:
        self.restarts += 1

    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult:
        check_timeout(timeout)
        started = datetime.now(timezone.utc)
        if not code.strip():
            self.probes.append(dict(user_expressions or {}))
            return CellResult(code, "ok", None, [], None, started, started)
        self.codes.append(code)
        cell = self.script.popleft() if self.script else FakeCell()
        self._count += 1
        outputs: list[NotebookNode] = []
        if cell.stdout:
            outputs.append(new_output("stream", name="stdout", text=cell.stdout))
        if cell.result is not None:
            outputs.append(
                new_output(
                    "execute_result",
                    data={"text/plain": cell.result},
                    execution_count=self._count,
                )
            )
        error = None
        if cell.error is not None:
            error = CellError(*cell.error, traceback=[f"{cell.error[0]}: {cell.error[1]}"])
            outputs.append(
                new_output(
                    "error", ename=error.ename, evalue=error.evalue, traceback=error.traceback
                )
            )
        for node in outputs:
            if on_output is not None:
                on_output(node)
        status: CellStatus = cell.status or ("error" if error is not None else "ok")
        if error is None and status in _STATUS_ERRORS:
            error = CellError(*_STATUS_ERRORS[status])
        return CellResult(
            code=code,
            status=status,
            execution_count=self._count,
            outputs=outputs,
            error=error,
            started=started,
            ended=datetime.now(timezone.utc),
            restarted=cell.restarted,
            user_expressions=dict(cell.user_expressions) if user_expressions else {},
        )
