"""One kernel's state and the questions asked of a kernel.

- :mod:`.state`: :class:`KernelState`, the one owner of an executor's kernel state:
  run and record a cell, the namespace change, the state cells and their rebuild after
  a restart, the model's view of a cell, the clean notebook and its verification.
  :class:`~kernel_agent.agent.AsyncAgent` and :class:`~kernel_agent.session.Session`
  each hold one.
- :mod:`.namespace`: the namespace summary probe and what changed between cells;
- :mod:`.rebuild`: the replay after a restart;
- :mod:`.kernel_probe`: what a kernel can import, and a preview of its data files
  (:mod:`.preview_source` is the code the kernel runs for the preview;
  :mod:`.preview_facts` reads what it measured).

Below the agent and the session: nothing here imports them, the service or the MCP server.
"""

from .state import CellRecord, KernelState

__all__ = ["CellRecord", "KernelState"]
