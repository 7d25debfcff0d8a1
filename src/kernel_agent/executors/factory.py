"""Pick and build the executor a run uses, from settings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..settings import Settings
from .base import AsyncExecutor

if TYPE_CHECKING:
    from .gateway import AsyncGatewaySession

__all__ = ["make_executor", "make_gateway_executor"]


def make_executor(settings: Settings) -> AsyncExecutor:
    """The executor ``settings`` asks for (a gateway kernel or a local one); not started yet.

    What isolates it is its :attr:`~.base.AsyncExecutor.isolation`: for a local kernel,
    its launcher's :class:`~kernel_agent.sandbox.SandboxStatus`. Raises
    :class:`~kernel_agent.errors.SandboxError` for ``sandbox="bwrap"`` on a host that
    cannot have it.
    """
    if settings.gateway_url:
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


def make_gateway_executor(
    settings: Settings, *, kernel_id: str | None = None, keep_kernel: bool | None = None
) -> AsyncGatewaySession:
    """An executor for ``settings.gateway_url`` / ``settings.gateway_token``; not started yet.

    Its kernel gets a work dir of its own, with ``settings.files`` (and an explicit
    ``--cwd``'s data files) sent in at start (:mod:`kernel_agent.remote.work`). The
    start request carries ``settings.gateway_env`` (``KERNEL_*`` from the environment).
    """
    from ..remote.work import RemoteWork, inputs_from_settings
    from .gateway import AsyncGatewaySession

    inputs, notes = inputs_from_settings(settings)
    session = AsyncGatewaySession(
        settings.gateway_url or "",
        settings.gateway_token,
        settings.kernel_name,
        kernel_id=kernel_id,
        keep_kernel=keep_kernel,
        env=settings.gateway_env,
        startup_timeout=settings.startup_timeout,
        max_output_chars=settings.max_output_chars,
    )
    session.files = RemoteWork(session, inputs, notes=notes)
    return session
