"""Generate a blocking facade from an async class, so there is one implementation."""

from __future__ import annotations

import inspect
from typing import Any

from jupyter_core.utils import run_sync

__all__ = ["sync_facade"]


def sync_facade(async_cls: type, *, name: str, doc: str | None = None) -> type:
    """Build a class wrapping ``async_cls`` whose coroutine methods block.

    The facade owns one instance of ``async_cls`` (``facade.aio``); coroutine
    methods become blocking ones via ``jupyter_core.utils.run_sync``, which keeps
    one event loop per thread (the one nbclient uses). Properties and plain
    attributes are forwarded. ``start``/``shutdown`` give it a context manager.
    """

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "aio", async_cls(*args, **kwargs))

    def __getattr__(self: Any, attr: str) -> Any:
        return getattr(self.aio, attr)

    def __enter__(self: Any) -> Any:
        self.start()
        return self

    def __exit__(self: Any, *exc: object) -> None:
        self.shutdown()

    namespace: dict[str, Any] = {
        "__init__": __init__,
        "__getattr__": __getattr__,
        "__enter__": __enter__,
        "__exit__": __exit__,
        "__doc__": doc or f"Blocking facade of :class:`{async_cls.__name__}`.",
    }
    for attr, value in inspect.getmembers(async_cls):
        if attr.startswith("__") or not inspect.iscoroutinefunction(value):
            continue
        namespace[attr] = _blocking(value)
    for attr, value in inspect.getmembers(async_cls, lambda v: isinstance(v, property)):
        namespace[attr] = property(lambda self, _a=attr: getattr(self.aio, _a))
    return type(name, (), namespace)


def _blocking(method: Any) -> Any:
    runner = run_sync(method)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return runner(self.aio, *args, **kwargs)

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call
