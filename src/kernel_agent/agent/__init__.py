"""The agent: a loop of mechanism (:mod:`.loop`, its blocking face :mod:`.blocking`), the
run's state (:mod:`.state`), the small-model levers it consults (:mod:`.levers`, a package
of one module per lever), the two protocols (:mod:`.protocols`), the message history
(:mod:`.history`), one streamed reply (:mod:`.reply`) and the end of a run
(:mod:`.handover`). Cells run through the kernel's
:class:`~kernel_agent.kernel_state.KernelState`."""

from .blocking import Agent
from .loop import AsyncAgent, default_notebook_path

__all__ = ["Agent", "AsyncAgent", "default_notebook_path"]
