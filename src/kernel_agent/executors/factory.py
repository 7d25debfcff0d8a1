"""Pick and build the executor a run uses, from settings."""

from __future__ import annotations

from pathlib import Path

from ..settings import Settings
from .base import AsyncExecutor

__all__ = ["make_executor"]


def make_executor(settings: Settings) -> AsyncExecutor:
    """The executor ``settings`` asks for (a gateway kernel or a local one); not started yet.

    What isolates it is its :attr:`~.base.AsyncExecutor.isolation`: for a local kernel,
    its launcher's :class:`~kernel_agent.sandbox.SandboxStatus`. Raises
    :class:`~kernel_agent.errors.SandboxError` for ``sandbox="bwrap"`` on a host that
    cannot have it.
    """
    if settings.gateway_url:
        from .gateway import make_gateway_executor

        return make_gateway_executor(
            settings, kernel_id=settings.gateway_kernel_id, keep_kernel=settings.keep_kernel
        )
    from ..sandbox import make_launcher
    from .kernel import AsyncKernelSession

    cwd = Path(settings.cwd) if settings.cwd else Path.cwd()
    return AsyncKernelSession(
        settings.kernel_name,
        cwd,
        env_passthrough=settings.env_passthrough,
        startup_timeout=settings.startup_timeout,
        max_output_chars=settings.max_output_chars,
        launcher=make_launcher(settings, cwd),
    )
