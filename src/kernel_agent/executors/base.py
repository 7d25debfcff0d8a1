"""The executor interface every backend implements.

A backend runs code somewhere (a local kernel, a gateway kernel, the current
IPython shell) and reports :class:`~kernel_agent.results.CellResult`s whose
outputs are nbformat NotebookNodes. The async protocol is the real one;
:class:`SyncExecutor` is the base of its blocking twins.

Everything the agent and the session read from an executor is declared here:
where its code runs (:attr:`~AsyncExecutor.cwd`, :attr:`~AsyncExecutor.kernel_cwd`),
what isolates it (:attr:`~AsyncExecutor.isolation`) and the launcher a verifying
kernel should get (:meth:`~AsyncExecutor.make_launcher`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from nbformat import NotebookNode

from ..errors import ConfigError
from ..results import CellResult
from ..syncify import SyncFacade, blocking

if TYPE_CHECKING:
    from ..sandbox import KernelLauncher, SandboxStatus

__all__ = ["AsyncExecutor", "Isolation", "OutputCallback", "SyncExecutor", "check_timeout"]

#: Called with each output NotebookNode as it arrives (for live rendering).
OutputCallback = Callable[[NotebookNode], object]


#: what isolates a kernel: bubblewrap, nothing, a remote machine, or not known yet
IsolationMode: TypeAlias = Literal["bwrap", "none", "remote", "unknown"]


@dataclass(frozen=True)
class Isolation:
    """What isolates the code an executor runs.

    ``mode`` is "bwrap", "none" (unsandboxed), "remote" or "unknown"; ``note`` is the
    short form for humans; ``warning`` is the loud message for a silent fall-back to no
    sandbox (None otherwise); ``details`` are extra JSON-ready facts for the notebook
    (the sandbox's user, limits, ...).
    """

    mode: IsolationMode
    reason: str = ""
    note: str = ""
    warning: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_status(cls, status: SandboxStatus) -> Isolation:
        """The isolation a local kernel started by a launcher with ``status`` gets."""
        details = {k: v for k, v in status.to_metadata().items() if k not in ("mode", "reason")}
        return cls(status.mode, status.reason, status.note, status.warning(), details)

    def to_metadata(self) -> dict[str, Any]:
        """The JSON-ready dict for ``metadata.kernel_agent.sandbox``."""
        return {**self.details, "mode": self.mode, "reason": self.reason, "note": self.note}


@runtime_checkable
class AsyncExecutor(Protocol):
    """What the agent and the session need from a place that runs code."""

    #: The kernelspec dict stored in notebook metadata (name, display_name, language).
    kernelspec: dict[str, Any]
    #: The kernel's language_info (from kernel_info_reply); empty until started.
    language_info: dict[str, Any]

    @property
    def cwd(self) -> Path | None:
        """The user's directory the code sees (read-only when sandboxed); None for a
        kernel on another machine."""
        ...

    @property
    def kernel_cwd(self) -> Path | None:
        """Where the code runs and writes: a sandboxed kernel's private work dir, else
        :attr:`cwd`; None for a kernel on another machine."""
        ...

    @property
    def isolation(self) -> Isolation:
        """What isolates the code (for the notebook's metadata and the user)."""
        ...

    def make_launcher(self) -> KernelLauncher | None:
        """The launcher for a local kernel that re-runs this one's notebook (verify);
        None for a plain kernel."""
        ...

    async def start(self) -> None: ...

    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult: ...

    async def interrupt(self) -> None: ...

    async def restart(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def is_alive(self) -> bool: ...


@runtime_checkable
class CommKernel(AsyncExecutor, Protocol):
    """An executor the host tools reach (local and gateway Python kernels): code
    injected at every (re)start, and comm messages both ways while a cell runs."""

    #: run silently after every (re)start (the kernel-side helpers); None for none
    init_code: str | None
    #: called with each ``comm_msg`` the kernel sends while a cell runs
    comm_handler: Callable[[dict[str, Any]], Any] | None

    async def inject(self, code: str) -> None:
        """Run ``code`` silently now and after every restart."""
        ...

    async def send_comm(self, comm_id: str, data: dict[str, Any], subshell_id: str | None) -> None:
        """Answer the kernel on its shell channel (to ``subshell_id`` when given)."""
        ...


E = TypeVar("E", bound=AsyncExecutor)


class SyncExecutor(SyncFacade[E]):
    """The blocking twin of an executor: the same members, with methods that block.

    ``with KernelSession(...) as k: k.execute(code)``. Each call runs the async
    method on an event loop (``jupyter_core``'s ``run_sync``, as nbclient does).
    """

    start = blocking(AsyncExecutor.start)
    execute = blocking(AsyncExecutor.execute)
    interrupt = blocking(AsyncExecutor.interrupt)
    restart = blocking(AsyncExecutor.restart)
    shutdown = blocking(AsyncExecutor.shutdown)
    is_alive = blocking(AsyncExecutor.is_alive)

    @property
    def kernelspec(self) -> dict[str, Any]:
        return self.aio.kernelspec

    @property
    def language_info(self) -> dict[str, Any]:
        return self.aio.language_info

    @property
    def cwd(self) -> Path | None:
        return self.aio.cwd

    @property
    def kernel_cwd(self) -> Path | None:
        return self.aio.kernel_cwd

    @property
    def isolation(self) -> Isolation:
        return self.aio.isolation

    def make_launcher(self) -> KernelLauncher | None:
        return self.aio.make_launcher()


def check_timeout(timeout: float | None, what: str = "timeout") -> None:
    """Every executor refuses a cell (or ``what``) timeout of zero or less the same way."""
    if timeout is not None and timeout <= 0:
        raise ConfigError(f"{what} must be positive, got {timeout}")
