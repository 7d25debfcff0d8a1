"""The agent: a loop of mechanism (:mod:`.loop`), the run's state (:mod:`.state`), the
small-model levers it consults (:mod:`.levers`), the two protocols (:mod:`.protocols`)
and the message history (:mod:`.history`)."""

from .loop import Agent, AsyncAgent, default_notebook_path

__all__ = ["Agent", "AsyncAgent", "default_notebook_path"]
