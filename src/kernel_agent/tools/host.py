"""What one agent run adds to its kernel: host tools, a declared result, installs.

:class:`HostSide` is the agent's one handle on this package: it prepares the
executor (the install site on the sandbox's read-only mounts, the kernel-side
helpers, the comm handler), writes the system prompt's section, gives each cell's
transcript metadata its tool calls, and at the end puts the declared result and
files on the :class:`~kernel_agent.events.RunResult`. Python kernels only; other
kernels get none of it (the README says so).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ..errors import InstallError, KernelStartError, ToolError
from ..executors.base import AsyncExecutor, CommKernel
from ..prompts import prompt
from ..settings import Settings
from .bridge import BridgeLimits, HostBridge, kernel_init_code
from .declared import DeclaredResult
from .installs import Installer, InstallPolicy, install_pinned, new_site
from .registry import describe_tools, load_tools, make_tools
from .remote_installs import RemoteInstalls
from .requirements import Pin

__all__ = ["HostSide", "helpers_section", "prepare_rerun"]

log = logging.getLogger(__name__)


class HostSide:
    def __init__(
        self,
        settings: Settings,
        tools: Sequence[Callable[..., Any]] = (),
        ask_install: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self.settings = settings
        self.tools = make_tools([*tools, *load_tools(settings.tools)])
        self.policy = InstallPolicy.parse(settings.install)
        self.result = DeclaredResult()
        self.site: Path | None = None
        self.installer: Installer | None = None
        self.ask_install = ask_install
        self.bridge = HostBridge(
            self.tools,
            BridgeLimits(timeout_s=settings.tool_timeout),
            {
                "set_result": self._set_result,
                "install": self._install,
                "installed": self._installed,
            },
        )
        self.active = False
        #: the kernel runs elsewhere (a gateway): no files to take, no site to install into
        self.remote = False
        #: the kernel's work dir on this host (None: a remote kernel, no files to take)
        self._work: Callable[[], Path | None] = lambda: None
        #: a remote kernel's permitted installs, awaiting its report (pip runs there)
        self.remote_installs: RemoteInstalls | None = None

    def prepare(self, executor: AsyncExecutor) -> None:
        """Before the kernel starts: the install site on the sandbox's read-only mounts."""
        if not isinstance(executor, CommKernel):
            return
        if executor.isolation.mode == "remote":  # a gateway kernel: it installs in its own site
            self.remote = True
            if self.policy.mode != "never" and self.installer is None:
                self.installer = Installer(self.policy, Path("/nonexistent"), self.ask_install)
                self.remote_installs = RemoteInstalls()
            return
        if self.policy.mode != "never" and self.site is None:
            self.site = new_site()
            self.installer = Installer(self.policy, self.site, self.ask_install)
            launcher = executor.make_launcher()
            if launcher is not None:
                launcher.extra_ro_paths = (*launcher.extra_ro_paths, self.site)

    async def attach(self, executor: AsyncExecutor, language: str) -> None:
        """After the kernel starts: inject the helpers (Python kernels that take them)."""
        if language != "python" or not isinstance(executor, CommKernel):
            return

        def work() -> Path | None:
            return executor.kernel_cwd or executor.cwd

        self._work = work
        try:
            await self.bridge.attach(executor, site=str(self.site) if self.site else None)
        except KernelStartError as exc:  # a Python kernel that is not IPython: no helpers
            log.warning("no host helpers in this kernel: %s", exc)
            executor.init_code = executor.comm_handler = None
            return
        self.active = True

    def prompt_section(self) -> str:
        """The system prompt's part about the helpers this run can use (empty when none)."""
        if not self.active:
            return ""
        return helpers_section(
            describe_tools(self.tools) if self.tools else "",
            self.policy,
            ask_result=self.settings.ask_result,
        )

    def result_missing(self) -> bool:
        """True while a run that asked for ``set_result`` has none."""
        return self.active and self.settings.ask_result and not self.result.declared

    def cell_metadata(self) -> dict[str, Any]:
        records = self.bridge.take_records()
        meta: dict[str, Any] = {"tool_calls": records} if records else {}
        left_out = self.bridge.take_left_out()
        if left_out:  # a flood of calls: the first ones are recorded, the rest counted
            meta["tool_calls_left_out"] = left_out
        return meta

    def run_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.active:
            out["host_helpers"] = True
        if self.installer is not None and self.installer.installed:
            out["installs"] = dict(self.installer.installed)
        if self.result.declared:
            out["result"] = {"data": self.result.data, "files": list(self.result.files)}
        return out

    def rerun_policy(self) -> InstallPolicy:
        """What this run's own ``--verify`` may install: exactly what the run installed."""
        if self.installer is None or not self.installer.installed:
            return InstallPolicy()
        names = frozenset(canonicalize_name(n) for n in self.installer.installed)
        return InstallPolicy("allow", names)

    def close(self) -> None:
        self.bridge.close()
        if self.site is not None:
            shutil.rmtree(self.site, ignore_errors=True)
            self.site = None

    async def _set_result(self, request: dict[str, Any]) -> Any:
        files = request.get("files") or []
        if not isinstance(files, list):
            raise ToolError("set_result: files must be a list of paths")
        work = self._work()
        if files and work is None and self.remote:  # checked by name here, by content on delivery
            from ..remote.result import declare_remote

            return declare_remote(self.result, request.get("data"), files)
        if files and work is None:
            raise ToolError(
                "set_result: files cannot be taken from a remote kernel; pass data only"
            )
        return self.result.declare(request.get("data"), [str(f) for f in files], work or Path("."))

    async def _install(self, request: dict[str, Any]) -> Any:
        if self.remote_installs is not None and self.installer is not None:
            pin = await self.installer.permit(request)  # checked and permitted here
            return self.remote_installs.instruct(pin)  # pip runs in the kernel
        if self.installer is None:  # policy "never": refused, with the policy's message
            return await Installer(self.policy, Path("/nonexistent")).install(request)
        return await self.installer.install(request)

    async def _installed(self, request: dict[str, Any]) -> Any:
        """A remote kernel's report of an install the host permitted (see remote_installs)."""
        if self.remote_installs is None or self.installer is None:
            raise InstallError("install_package: no install is pending in this session")
        project, version = self.remote_installs.report(request)
        self.installer.installed[project] = version
        return {"name": project, "version": version}


def helpers_section(tools: str, policy: InstallPolicy, *, ask_result: bool) -> str:
    """The system prompt's lines for the helpers a run can use; "" when it can use none.

    ``call_tool`` is described only with host tools (``tools``, their descriptions),
    ``set_result`` only when the run asks for a result, ``install_package`` only under an
    install policy other than ``never``. The helpers are defined in the kernel either way;
    a small model told of one it cannot use calls it anyway (``call_tool("set_result")``).
    The order is fixed, so the same settings give the same text (a warm model's prefix).
    """
    lines = []
    if tools:
        lines.append(prompt("host_call_tool", tools=tools))
    if ask_result:
        lines.append(prompt("host_set_result"))
    if policy.mode != "never":
        lines.append(prompt("host_install", policy=str(policy)))
    if not lines:
        return ""
    section = prompt("host_tools", helpers="\n".join(lines))
    return f"{section}\n{prompt('result_wanted')}" if ask_result else section


async def prepare_rerun(
    run_meta: dict[str, Any], pins: list[Pin] | None = None
) -> tuple[str | None, Path | None]:
    """For a verify re-run of a notebook a run made: (helpers' init code, install site).

    ``pins`` are the notebook's recorded installs as :func:`~.installs.check_rerun`
    checked and allowed them (nothing is installed without them: the recorded
    ``installs`` are only passed on to the helpers). They go, at their exact versions,
    into a fresh site the caller mounts read-only for the kernel (and removes
    afterwards). (None, None) for a notebook made without the helpers.
    """
    installs = run_meta.get("installs")
    if not run_meta.get("host_helpers") and not installs:
        return None, None
    site = None
    if pins:
        site = new_site()
        try:
            await install_pinned(site, pins)
        except BaseException:
            shutil.rmtree(site, ignore_errors=True)
            raise
    # the helpers echo the names as the run recorded them (checked, so safe to embed)
    wanted = {p.name for p in pins or []}
    recorded = {
        n: v for n, v in dict(installs or {}).items() if canonicalize_name(str(n)) in wanted
    }
    code = kernel_init_code(
        listening=False, site=str(site) if site else None, rerun={"installs": recorded}
    )
    return code, site
