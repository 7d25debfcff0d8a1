"""The end of a run: its summary, the kernel's files beside the notebook, ``set_result``'s data and
files, the clean notebook and its verification.

What the kernel wrote is hostile: it comes back as content, one archive beside the notebook
and ``set_result``'s inert data files (:func:`kernel_agent.edges.delivery.deliver`); a remote
kernel's files come over its channels first (:mod:`kernel_agent.remote.work`). A failure here
costs a notice, never the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KernelAgentError, one_line
from ..events import Event, Notice, RunResult

if TYPE_CHECKING:
    from ..edges.delivery import Delivery
    from ..executors.base import AsyncExecutor
    from ..kernel_state import KernelState
    from ..remote.work import RemoteWork
    from ..settings import Settings
    from ..tools.host import HostSide
    from .budget import Budget

__all__ = ["hand_over", "remote_files", "summarise"]


def summarise(result: RunResult, budget: Budget) -> dict[str, Any]:
    """Fill ``result``'s kernel time, cost and budget (its cells, usage and duration set);
    returns the run's metadata for the notebook."""
    result.kernel_time_s = sum(c.duration for c in result.cells)
    result.cost = budget.cost if budget.price is not None else None
    result.budget = budget.as_metadata() if budget.limits else None
    spent: dict[str, Any] = {"budget": result.budget} if result.budget else {}
    if result.cost is not None:
        spent["cost"] = round(result.cost, 6)
    return {
        **spent,
        "status": result.status,
        "usage": result.usage.as_dict(),
        "duration_s": round(result.duration_s, 3),
        "model_time_s": round(result.model_time_s, 3),
        "kernel_time_s": round(result.kernel_time_s, 3),
    }


def remote_files(executor: AsyncExecutor | None) -> RemoteWork | None:
    """A remote kernel's work dir (its files come over the kernel's channels)."""
    from ..executors.gateway import AsyncGatewaySession

    return executor.files if isinstance(executor, AsyncGatewaySession) else None


async def hand_over(
    result: RunResult,
    *,
    state: KernelState,
    host: HostSide,
    settings: Settings,
    work_dir: Path,
    run_meta: Callable[..., None],
) -> AsyncIterator[Event]:
    """Deliver the run's files, its declared result and the clean notebook into ``result``.

    ``run_meta(**values)`` records the run's metadata (the files delivered, the verdict).
    """
    notebook = state.transcript.path
    remote = remote_files(state.executor)
    declared = list(host.result.files) if host.result.declared else []
    found: Delivery | Notice | None
    if remote is not None:
        found = await _deliver_remote(remote, notebook, declared)
    else:
        found = _deliver(state, notebook, declared)
    if isinstance(found, Notice):
        yield found
    elif found is not None:
        if host.result.declared:  # set_result's files: the inert data ones, loose
            result.files = found.loose
        elif found.archive is not None:
            result.files = [found.archive]
        if found.changed:
            run_meta(files=found.members)
        text = found.notice()
        if text is not None:
            yield Notice(text, "warning" if found.notes else "info")
    if host.result.declared:
        result.result = host.result.data
    if settings.clean_notebook:
        try:
            result.clean_notebook = clean = state.write_clean()
            if settings.verify:
                yield Notice(f"verifying {clean} in a fresh kernel")
                # in the kernel's own work dir (the verifying kernel sees what it saw), with
                # what this run installed and nothing the notebook could add
                report = await state.verify(cwd=work_dir, install=host.rerun_policy())
                result.verify = report.to_metadata()
                level = "info" if report.reproduced else "warning"
                yield Notice(f"verify: {report.summary()}", level)
        except Exception as exc:  # hostile outputs or a full disk: the answer is not lost
            yield Notice(f"no clean notebook: {one_line(exc)}", "warning")


def _deliver(state: KernelState, notebook: Path, declared: list[str]) -> Delivery | None:
    """Archive the files the kernel wrote in its private work dir beside the notebook."""
    from ..edges.delivery import deliver

    work, executor = state.executor.kernel_cwd, state.executor
    if work is None:
        return None
    if work == executor.cwd:  # no private work dir: the kernel wrote in the user's own
        return deliver(work, notebook, declared=declared, archive=False) if declared else None
    return deliver(work, notebook, declared=declared)


async def _deliver_remote(
    remote: RemoteWork, notebook: Path, declared: list[str]
) -> Delivery | Notice:
    """Pull the files a remote kernel wrote in its work dir beside the notebook."""
    try:
        return await remote.deliver(notebook, declared)
    except KernelAgentError as exc:  # the answer is not lost for want of the files
        return Notice(f"no files from the remote kernel: {exc}", "warning")
