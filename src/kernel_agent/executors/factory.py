"""Pick and build the executor a run uses, from settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..settings import Settings
from .base import AsyncExecutor

__all__ = ["make_executor"]


def make_executor(settings: Settings) -> tuple[AsyncExecutor, dict[str, Any], str | None]:
    """(executor, sandbox metadata, warning or None) for ``settings``; not started yet.

    The metadata dict goes into the notebook (``metadata.kernel_agent.sandbox``; its
    ``note`` is a short form for humans); the warning is for a silent fall-back only.

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
        note = f"remote kernel on {settings.gateway_url}"
        return executor, {"mode": "remote", "reason": "Jupyter gateway", "note": note}, None
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
    status = launcher.status
    return session, {**status.to_metadata(), "note": status.note}, status.warning()
