"""The kernel of a notebook open on a Jupyter server: :class:`AsyncNotebookExecutor`.

``--jupyter-url URL --notebook PATH``: the agent works in the notebook the user has
open in JupyterLab. Its kernel is the server's own kernel for that notebook (the
session JupyterLab opened, or a new one), reached exactly as a Kernel Gateway's
kernel is (``jupyter_server``'s ``/api/kernels/{id}/channels`` speaks the same
protocol), so this is :class:`~kernel_agent.executors.gateway.AsyncGatewaySession`
with three differences:

- each cell of the agent's is also a cell of the notebook's shared document
  (:class:`~.shared_doc.SharedNotebook`): it appears, runs (``[*]``), its outputs
  stream in, and its execution count lands, while the user keeps typing;
- the kernel is the user's: never deleted, never replaced by a new one (a kernel the
  server no longer has ends the run with a one-line error);
- the code runs **unsandboxed**, with the user's variables, files and credentials.

Probes (an empty cell carrying ``user_expressions``) and the silent start-up code are
not cells: they never reach the document.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import JupyterError, KernelDied
from ..executors.base import Isolation, OutputCallback
from ..executors.gateway import AsyncGatewaySession
from ..results import CellResult
from .server import JupyterServer
from .shared_doc import SharedNotebook

__all__ = ["AsyncNotebookExecutor", "CELL_METADATA", "UNSANDBOXED"]

log = logging.getLogger(__name__)

UNSANDBOXED = (
    "the model's code runs UNSANDBOXED in your notebook's own kernel on {url}: it can read "
    "and change your variables, files and environment (API keys included); "
    "--approve asks before each cell"
)
#: what the agent's cells carry in the shared document's metadata
CELL_METADATA = {"kernel_agent": {"source": "agent"}}


class AsyncNotebookExecutor(AsyncGatewaySession):
    """The kernel of ``server``'s notebook; each cell also written into its shared document."""

    def __init__(
        self,
        server: JupyterServer,
        *,
        kernel_name: str | None = None,
        startup_timeout: float = 60.0,
        max_output_chars: int = 1_000_000,
    ) -> None:
        super().__init__(
            server.url,
            server.token,
            kernel_name,
            keep_kernel=True,
            startup_timeout=startup_timeout,
            max_output_chars=max_output_chars,
        )
        self.rest = server.rest
        self.server = server
        #: the notebook's shared document, once started
        self.doc: SharedNotebook | None = None

    async def start(self) -> None:
        """Find (or make) the notebook's kernel, join its document, then attach."""
        if self._channels is not None:
            return
        await self.server.check_notebook()
        self.kernel_id, name = await self.server.notebook_kernel(self.kernel_name)
        self.kernel_name = name or self.kernel_name
        self.keep_kernel = True
        if self.doc is None or self.doc.gone is not None:
            doc = SharedNotebook(await self.server.room_url(), self.server.headers)
            await doc.open()
            self.doc = doc
        await super().start()

    async def shutdown(self) -> None:
        """Leave the kernel running (it is the notebook's); close the document."""
        self.keep_kernel = True
        await super().shutdown()
        if self.doc is not None:
            await self.doc.close()

    @property
    def instructions(self) -> str:
        """What an MCP client is told (``kernel-agent mcp --jupyter-url``)."""
        return (
            f"The Jupyter notebook {self.server.path!r}, open in JupyterLab, and its own kernel "
            "(UNSANDBOXED: the user's variables, files and credentials). Each run_cell is a new "
            "cell at the end of that notebook, run in that kernel: the user sees it appear and "
            "run. Read the notebook's earlier cells with read_notebook and the variables with "
            "list_variables first. Finish with verify_notebook (the clean notebook re-runs in a "
            "fresh kernel, the notebook's cells first)."
        )

    @property
    def isolation(self) -> Isolation:
        return Isolation(
            "none",
            "the notebook's kernel on a Jupyter server",
            f"unsandboxed: {self.server.path}'s own kernel on {self.url}",
        )

    async def _open_channels(self) -> None:
        await super()._open_channels()
        # A restart through jupyter_server's REST (Kernel > Restart in JupyterLab) says
        # no "restarting" on the websocket: the new kernel's parentless "starting" is
        # the only sign that the state the cell ran on is gone.
        assert self._channels is not None
        self._channels.death_states = ("restarting", "dead", "starting")

    def _is_death(self, msg: dict[str, Any]) -> bool:
        if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "starting":
            self._death = "the Jupyter server restarted it (restarting)"
            return True
        return super()._is_death(msg)

    async def _replace_kernel(self, death: str) -> bool:
        """The server no longer has the notebook's kernel: never start one of our own."""
        raise KernelDied(
            f"the kernel of {self.server.path} is gone from the Jupyter server ({death}); "
            "start it again in JupyterLab and re-run"
        )

    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult:
        """Run ``code``; a real cell (not a probe) is also a cell of the shared document."""
        doc = self.doc
        if doc is None or not code.strip():
            return await super().execute(code, timeout, on_output, user_expressions)
        doc.check()
        cell_id = doc.add_code_cell(code, CELL_METADATA)
        doc.set_state(cell_id, "running")

        def live(node: Any) -> None:
            if doc.gone is None:
                doc.append_output(cell_id, node)
            if on_output is not None:
                on_output(node)

        try:
            result = await super().execute(code, timeout, live, user_expressions)
        except BaseException:
            if doc.gone is None:
                doc.set_state(cell_id, "idle")
            raise
        if doc.gone is not None:
            raise JupyterError(f"{doc.gone}; the transcript keeps the cells so far")
        doc.finish_cell(cell_id, result.outputs, result.execution_count)
        await doc.flush()
        return result
