"""Pick and build the executor a run uses, from settings."""

from __future__ import annotations

from pathlib import Path

from ..settings import Settings
from .base import AsyncExecutor

__all__ = ["make_executor"]


def make_executor(settings: Settings) -> tuple[AsyncExecutor, str]:
    """(executor, sandbox description) for ``settings``; not started yet.

    A local kernel's ``session.launcher.status`` is the full
    :class:`~kernel_agent.sandbox.SandboxStatus` (``to_metadata()`` for the notebook,
    ``warning()`` for a silent fall-back). Raises :class:`~kernel_agent.errors.SandboxError`
    for ``sandbox="bwrap"`` on a host that cannot have it.
    """
    if settings.gateway_url:
        from .gateway import make_gateway_executor

        executor = make_gateway_executor(
            settings, kernel_id=settings.gateway_kernel_id, keep_kernel=settings.keep_kernel
        )
        return executor, f"remote kernel on {settings.gateway_url}"
    from ..sandbox import make_launcher
    from .kernel import AsyncKernelSession

    cwd = Path(settings.cwd) if settings.cwd else Path.cwd()
    launcher = make_launcher(settings, cwd)
    session = AsyncKernelSession(
        settings.kernel_name,
        cwd,
        env_passthrough=settings.env_passthrough,
        startup_timeout=settings.startup_timeout,
        max_output_chars=settings.max_output_chars,
        launcher=launcher,
    )
    return session, launcher.status.note
