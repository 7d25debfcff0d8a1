"""Re-execute a notebook top to bottom in a fresh kernel and check it reproduces.

:func:`verify_notebook` (blocking) and :func:`async_verify_notebook` run every code
cell with nbclient in a new kernel of the notebook's kernelspec (or ``kernel_name``),
compare each cell's new outputs with the stored ones through
:func:`kernel_agent.notebook.compare.compare_outputs` (as root, in one unprivileged
worker process: :mod:`kernel_agent.notebook.worker`), and return a :class:`VerifyReport`
with a result per code cell and the first cell that differs.

The kernel can be put in the sandbox the agent uses: pass the same ``launcher``
object :class:`~kernel_agent.executors.kernel.AsyncKernelSession` takes (its
``prepare(km, launch_kw) -> launch_kw`` and optional ``cleanup(km)`` hooks), and/or
a ``kernel_manager_factory(kernel_name) -> AsyncKernelManager``. As in a session,
the kernel's environment is ours without secret-looking variables.

A cell that times out or a kernel that dies ends the run: that cell is an
``error`` and the cells after it are ``not_run``; the verdict is ``error``.
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nbformat import NotebookNode

from ..errors import KernelNotFound, KernelStartError, VerifyMismatch, one_line
from ..sandbox.env import kernel_environment
from . import worker
from .cellmeta import cell_meta, run_meta_for_writing
from .cellmeta import run_meta as run_record
from .compare import ImageTolerance
from .nbio import read_notebook
from .transcript import write_notebook_atomic

if TYPE_CHECKING:
    from ..sandbox import KernelLauncher

__all__ = [
    "CellCheck",
    "VerifyReport",
    "async_verify_notebook",
    "verify_notebook",
    "record_verdict",
    "ImageTolerance",
]

Verdict = Literal["reproduced", "differs", "error"]
CheckStatus = Literal["same", "differs", "error", "not_run"]


@dataclass
class CellCheck:
    """One code cell: stored outputs vs. re-executed ones.

    ``index`` is the cell's position in the notebook, ``number`` its position
    among code cells (1-based). ``seconds`` is the re-execution wall time,
    ``original_seconds`` the time recorded when the notebook was made (None if
    the notebook does not say).
    """

    index: int
    number: int
    status: CheckStatus
    execution_count: int | None = None
    problems: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    seconds: float | None = None
    original_seconds: float | None = None

    @property
    def label(self) -> str:
        shown = f"In [{self.execution_count}]" if self.execution_count is not None else "In [ ]"
        return f"code cell {self.number} ({shown})"


@dataclass
class VerifyReport:
    """The outcome of :func:`verify_notebook`."""

    path: Path
    kernel_name: str
    cells: list[CellCheck]
    image_tolerance: ImageTolerance
    startup_s: float = 0.0
    total_s: float = 0.0
    error: str | None = None
    executed: NotebookNode | None = field(default=None, repr=False)
    written: Path | None = None

    @property
    def verdict(self) -> Verdict:
        if self.error is not None:
            return "error"
        return "differs" if self.first_difference is not None else "reproduced"

    @property
    def reproduced(self) -> bool:
        return self.verdict == "reproduced"

    @property
    def first_difference(self) -> CellCheck | None:
        """The first cell that did not reproduce (differs or failed to run)."""
        return next((c for c in self.cells if c.status in ("differs", "error")), None)

    @property
    def execute_s(self) -> float:
        """Wall time spent executing cells (kernel start-up excluded)."""
        return sum(c.seconds or 0.0 for c in self.cells)

    @property
    def original_s(self) -> float | None:
        """Recorded execution time of the same cells, if the notebook has it."""
        times = [c.original_seconds for c in self.cells if c.status != "not_run"]
        if not times or any(t is None for t in times):
            return None
        return float(sum(t for t in times if t is not None))

    def summary(self) -> str:
        same = sum(c.status == "same" for c in self.cells)
        text = f"{self.verdict}: {same}/{len(self.cells)} code cells reproduced"
        if self.error:
            text += f"; {self.error}"
        elif (first := self.first_difference) is not None:
            text += f"; first difference at {first.label}: {first.problems[0]}"
        return text

    def to_metadata(self) -> dict[str, Any]:
        """What goes under ``metadata.kernel_agent.notebook.verify``."""
        first = self.first_difference
        return {
            "verdict": self.verdict,
            "checked": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "kernel": self.kernel_name,
            "code_cells": len(self.cells),
            "reproduced_cells": sum(c.status == "same" for c in self.cells),
            "first_difference": None
            if first is None
            else {"cell": first.index, "code_cell": first.number, "problems": first.problems[:5]},
            "error": self.error,
            "seconds": round(self.total_s, 3),
            "image_tolerance": {
                "fraction": self.image_tolerance.fraction,
                "mean": self.image_tolerance.mean,
                "pixel_threshold": self.image_tolerance.pixel_threshold,
            },
        }

    def raise_for_mismatch(self) -> None:
        """Raise :class:`VerifyMismatch` unless the notebook reproduced."""
        if not self.reproduced:
            raise VerifyMismatch(
                f"{self.path.name} did not reproduce: {one_line(self.summary(), 240)}"
            )


# ----------------------------------------------------------------- running
async def async_verify_notebook(
    path: str | Path,
    *,
    kernel_name: str | None = None,
    timeout: float | None = 120.0,
    startup_timeout: float = 60.0,
    image_tolerance: ImageTolerance | float | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    env_passthrough: tuple[str, ...] | list[str] = (),
    launcher: KernelLauncher | None = None,
    kernel_manager_factory: Callable[[str], Any] | None = None,
    write: str | Path | None = None,
    install: Any = "never",
    ask_install: Callable[[str], Awaitable[bool]] | None = None,
) -> VerifyReport:
    """Re-execute the notebook at ``path`` in a fresh kernel and compare outputs.

    ``kernel_name`` overrides the notebook's kernelspec. ``timeout`` is per cell.
    ``image_tolerance`` is an :class:`ImageTolerance` or a float (the fraction of
    pixels allowed to differ). ``cwd`` defaults to the notebook's directory.
    ``write`` saves the re-executed notebook (with the verdict in its metadata).

    ``install`` (an :class:`~kernel_agent.tools.installs.InstallPolicy` or its text,
    ``never|ask|allow:a,b|any``, default ``never``) decides whether the packages the
    notebook's ``metadata.kernel_agent.installs`` names are installed for the re-run:
    they are someone else's request to run pip on this host. They are checked first
    (names, exact versions); ``never`` refuses with :class:`~kernel_agent.errors.InstallError`
    before any kernel starts; ``ask`` calls ``ask_install("a==1 b==2")``.
    """
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    path = Path(path)
    tolerance = _tolerance(image_tolerance)
    nb = read_notebook(path)
    name = kernel_name or (nb.metadata.get("kernelspec") or {}).get("name")
    if not name:
        raise KernelNotFound(f"{path} names no kernel (no metadata.kernelspec); pass --kernel NAME")
    python = (nb.metadata.get("language_info") or {}).get("name", "python") == "python"
    run_meta = run_record(nb.metadata)
    pins = None
    if python:  # before anything starts: refused installs refuse the whole verify
        from ..tools.installs import InstallPolicy, check_rerun

        policy = install if isinstance(install, InstallPolicy) else InstallPolicy.parse(install)
        pins = await check_rerun(
            run_meta.get("installs"), policy, ask_install, one_line(path.name, 80)
        )
    km = _kernel_manager(name, kernel_manager_factory)
    workdir = Path(cwd) if cwd is not None else path.resolve().parent
    executed = copy.deepcopy(nb)
    client = _bounded_client(
        executed,
        km=km,
        kernel_name=name,
        timeout=timeout,
        startup_timeout=int(startup_timeout),
        allow_errors=True,
        interrupt_on_timeout=False,
        shutdown_kernel="immediate",
        record_timing=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    launch_kw: dict[str, Any] = {
        "cwd": str(workdir),
        "env": kernel_environment(env, env_passthrough),
    }
    if launcher is None:  # sandboxed as a run would be: never a bare kernel in the user's dir
        from ..sandbox import make_launcher
        from ..settings import Settings

        launcher = make_launcher(Settings.from_env(), workdir)
    # a notebook a run made with the host helpers: the same helpers (not listening), and
    # the packages it installed, at the recorded versions, in a fresh read-only site
    init_code, site = None, None
    if python:
        from ..tools.host import prepare_rerun

        init_code, site = await prepare_rerun(run_meta, pins)
    mounts = launcher.extra_ro_paths
    if site is not None:
        launcher.extra_ro_paths = (*mounts, site)
    launch_kw = launcher.prepare(km, launch_kw)

    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    checks = [
        CellCheck(i, n, "not_run", c.get("execution_count"), original_seconds=_original_seconds(c))
        for n, (i, c) in enumerate(code, start=1)
    ]
    report = VerifyReport(path, name, checks, tolerance, executed=executed)
    ran: list[CellCheck] = []  # run to the end: compared once the kernel is gone
    began = time.perf_counter()
    started = False
    try:
        async with client.async_setup_kernel(cleanup_kc=True, **launch_kw):
            started = True
            launcher.seal(km)  # it answered: its ipc paths stay its own sockets
            if init_code is not None:
                assert client.kc is not None
                reply = await client.async_wait_for_reply(
                    client.kc.execute(init_code, silent=True, store_history=False)
                )
                if (reply or {}).get("content", {}).get("status") != "ok":
                    raise KernelStartError("the host helpers could not be set up in the kernel")
            report.startup_s = time.perf_counter() - began
            for check in checks:
                cell = executed.cells[check.index]
                t0 = time.perf_counter()
                try:
                    await client.async_execute_cell(cell, check.index)
                except CellTimeoutError:
                    check.status = "error"
                    report.error = f"{check.label} timed out after {timeout:g} s"
                except DeadKernelError:
                    check.status = "error"
                    report.error = f"the kernel died while running {check.label}"
                client.finish_cell(cell, check.index)
                check.seconds = time.perf_counter() - t0
                if report.error is not None:
                    check.problems = [report.error]
                    break
                ran.append(check)
    except Exception as exc:
        if started:
            raise
        raise KernelStartError(f"kernel {name!r} failed to start: {one_line(exc)}") from exc
    finally:
        launcher.cleanup(km)
        if site is not None:
            launcher.extra_ro_paths = mounts
            shutil.rmtree(site, ignore_errors=True)
    pairs = [(nb.cells[c.index].outputs, executed.cells[c.index].outputs) for c in ran]
    for check, (same, problems, diff) in zip(
        ran, await asyncio.to_thread(compare_all, pairs, tolerance), strict=True
    ):
        check.status = "same" if same else "differs"
        check.problems, check.diff = problems, diff
    report.total_s = time.perf_counter() - began
    if write is not None:
        run_meta_for_writing(executed.metadata)["verify"] = report.to_metadata()
        write_notebook_atomic(executed, write)
        report.written = Path(write)
    return report


def compare_all(
    pairs: list[tuple[Any, Any]], tolerance: ImageTolerance
) -> list[tuple[bool, list[str], list[str]]]:
    """Each (stored, re-executed) outputs pair compared: (same, problems, diff).

    Both sides are a kernel's bytes (images Pillow decodes): as root this runs in one
    unprivileged worker process for the whole notebook (:mod:`.worker`).
    """
    if not pairs:
        return []
    request = {
        "pairs": [[list(a), list(b)] for a, b in pairs],
        "tolerance": [tolerance.fraction, tolerance.mean, tolerance.pixel_threshold],
    }
    return [(bool(s), list(p), list(d)) for s, p, d in worker.call("compare", request)]


def verify_notebook(path: str | Path, **kwargs: Any) -> VerifyReport:
    """Blocking :func:`async_verify_notebook` (same arguments)."""
    from jupyter_core.utils import run_sync

    return run_sync(async_verify_notebook)(path, **kwargs)


def record_verdict(path: str | Path, report: VerifyReport) -> None:
    """Store ``report.to_metadata()`` as ``metadata.kernel_agent.notebook.verify`` of ``path``."""
    nb = read_notebook(path)
    run_meta_for_writing(nb.metadata)["verify"] = report.to_metadata()
    write_notebook_atomic(nb, path)


# ----------------------------------------------------------------- helpers
_COLLECTED = frozenset(
    ("stream", "display_data", "execute_result", "error", "clear_output", "update_display_data")
)


def _bounded_client(nb: Any, **kwargs: Any) -> Any:
    """An nbclient ``NotebookClient`` whose cells keep what a run's cells keep: every
    output message of a cell goes through an :class:`OutputCollector` (one display map
    and one :class:`RunBudget` for the notebook), and forged execution counts are
    dropped. The re-run's kernel runs someone's code: its outputs are bounded as a
    run's are, and compared with outputs that were bounded the same way."""
    from nbclient import NotebookClient

    from .bounds import RunBudget, sane_count
    from .outputs import DisplayMap, OutputCollector

    class BoundedClient(NotebookClient):
        def __init__(self, nb: Any, **kwargs: Any) -> None:
            super().__init__(nb, **kwargs)
            self.display_map_bounded: DisplayMap = {}
            self.run_budget = RunBudget.for_outputs(1_000_000)
            self.collectors: dict[int, OutputCollector] = {}

        def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
            content = msg.get("content")
            if msg.get("msg_type") in _COLLECTED:
                collector = self.collectors.get(cell_index)
                if collector is None:
                    collector = OutputCollector(
                        display_map=self.display_map_bounded, run_budget=self.run_budget
                    )
                    self.collectors[cell_index] = collector
                collector.feed(msg)
                return None
            if isinstance(content, dict) and "execution_count" in content:
                count = sane_count(content["execution_count"])
                msg = {**msg, "content": {**content, "execution_count": count}}
            return super().process_message(msg, cell, cell_index)

        def finish_cell(self, cell: Any, cell_index: int) -> None:
            collector = self.collectors.pop(cell_index, None)
            cell.outputs = collector.finish() if collector is not None else []
            cell.execution_count = sane_count(cell.get("execution_count"))

    return BoundedClient(nb, **kwargs)


def _tolerance(value: ImageTolerance | float | None) -> ImageTolerance:
    if value is None:
        return ImageTolerance()
    if isinstance(value, ImageTolerance):
        return value
    from ..errors import ConfigError

    # A float is the fraction of pixels allowed to differ; the mean difference may
    # be what that many fully different pixels give, so 0 means pixel-exact.
    try:
        return ImageTolerance(fraction=float(value), mean=255.0 * float(value))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _kernel_manager(name: str, factory: Callable[[str], Any] | None) -> Any:
    from jupyter_client.kernelspec import NoSuchKernel
    from jupyter_client.manager import AsyncKernelManager

    km = factory(name) if factory is not None else AsyncKernelManager(kernel_name=name)
    try:
        spec = km.kernel_spec
    except NoSuchKernel:
        spec = None
    if spec is None:
        raise KernelNotFound(f"no Jupyter kernel named {name!r} is installed")
    return km


def _original_seconds(cell: NotebookNode) -> float | None:
    """The execution time recorded in the notebook: kernel-agent's, else nbclient's."""
    recorded = cell_meta(cell).get("exec_s")
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return float(recorded)
    meta = cell.get("metadata")
    timing = meta.get("execution") if isinstance(meta, dict) else None
    if not isinstance(timing, dict):
        return None
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if isinstance(start, str) and isinstance(end, str):
        try:
            delta = datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(
                start.replace("Z", "+00:00")
            )
        except ValueError:
            return None
        return delta.total_seconds()
    return None
