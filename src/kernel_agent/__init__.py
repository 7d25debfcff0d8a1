"""kernel-agent: an LLM agent that writes code into a live Jupyter kernel.

Public names are imported lazily so that ``kernel-agent --help`` starts fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees; at run time each name is imported on first use
    from .agent import Agent as Agent
    from .agent import AsyncAgent as AsyncAgent
    from .errors import KernelAgentError as KernelAgentError
    from .events import RunResult as RunResult
    from .executors.gateway import GatewaySession as GatewaySession
    from .executors.kernel import AsyncKernelSession as AsyncKernelSession
    from .executors.kernel import KernelSession as KernelSession
    from .notebook.export import export_notebook as export_notebook
    from .notebook.transcript import Transcript as Transcript
    from .notebook.verify import verify_notebook as verify_notebook
    from .results import CellError as CellError
    from .results import CellResult as CellResult
    from .settings import Settings as Settings

from .version import __version__

_EXPORTS = {
    "Agent": "kernel_agent.agent",
    "AsyncAgent": "kernel_agent.agent",
    "RunResult": "kernel_agent.events",
    "KernelAgentError": "kernel_agent.errors",
    "KernelSession": "kernel_agent.executors.kernel",
    "AsyncKernelSession": "kernel_agent.executors.kernel",
    "CellResult": "kernel_agent.results",
    "CellError": "kernel_agent.results",
    "Transcript": "kernel_agent.notebook.transcript",
    "Settings": "kernel_agent.settings",
    "GatewaySession": "kernel_agent.executors.gateway",
    "verify_notebook": "kernel_agent.notebook.verify",
    "export_notebook": "kernel_agent.notebook.export",
}

__all__ = [*_EXPORTS, "__version__", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'kernel_agent' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext kernel_agent``."""
    import_module("kernel_agent.frontends.magics").load_ipython_extension(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    import_module("kernel_agent.frontends.magics").unload_ipython_extension(ipython)
