"""The end of a run: its summary, the kernel's files beside the notebook, ``set_result``'s data and
files, the clean notebook and its verification.

What the kernel wrote is hostile: local files are copied by :mod:`kernel_agent.edges.delivery`
(bounded, links never followed), a remote kernel's come over its channels
(:mod:`kernel_agent.remote.work`). A failure here costs a notice, never the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KernelAgentError, one_line
from ..events import Event, Notice, RunResult

if TYPE_CHECKING:
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
    found = await _deliver_remote(remote, notebook) if remote else _deliver(state, notebook)
    if isinstance(found, Notice):
        yield found
    elif found is not None:
        notice = _delivered(result, notebook, *found, run_meta)
        if notice is not None:
            yield notice
    if host.result.declared:  # set_result's data, and its files beside the notebook
        result.result = host.result.data
        if remote is not None:
            result.files, left_out = await _deliver_result_remote(remote, host, notebook)
        else:
            result.files, left_out = host.deliver(notebook)
        if left_out:
            yield Notice(f"result files left out: {'; '.join(left_out[:3])}", "warning")
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


def _deliver(state: KernelState, notebook: Path) -> tuple[list[Path], list[str]] | None:
    """Copy the files the kernel wrote in its private work dir beside the notebook."""
    from ..edges.delivery import deliver_work_files

    work, executor = state.executor.kernel_cwd, state.executor
    if work is None or work == executor.cwd:
        return None  # no private work dir: the kernel wrote in the user's own
    return deliver_work_files(work, notebook)


async def _deliver_remote(
    remote: RemoteWork, notebook: Path
) -> tuple[list[Path], list[str]] | Notice:
    """Pull the files a remote kernel wrote in its work dir beside the notebook."""
    try:
        return await remote.deliver(notebook)
    except KernelAgentError as exc:  # the answer is not lost for want of the files
        return Notice(f"no files from the remote kernel: {exc}", "warning")


async def _deliver_result_remote(
    remote: RemoteWork, host: HostSide, notebook: Path
) -> tuple[list[Path], list[str]]:
    declared = host.result
    try:
        return await remote.deliver_result(declared.files, notebook, declared.limits.max_file_bytes)
    except KernelAgentError as exc:
        return [], [str(exc)]


def _delivered(
    result: RunResult,
    notebook: Path,
    delivered: list[Path],
    skipped: list[str],
    run_meta: Callable[..., Any],
) -> Notice | None:
    result.files = delivered
    if delivered:
        run_meta(files=[p.name for p in delivered])
    if not delivered and not skipped:
        return None
    where = notebook.with_name(f"{notebook.stem}_files") / "work"
    text = f"{len(delivered)} file(s) the kernel wrote are in {where}"
    if skipped:
        text += f"; left out: {'; '.join(skipped[:3])}"
    return Notice(text, "warning" if skipped else "info")
