"""Blocking facades over the async core, so there is one implementation.

- :class:`SyncFacade` is the base of a blocking class over an async one; each
  coroutine method is declared once with :class:`blocking` (it blocks via
  ``jupyter_core.utils.run_sync``, nbclient's helper), so type checkers see it.
- :class:`BackgroundLoop` runs an event loop in a thread of its own, for objects
  whose async state (zmq sockets, HTTP clients) must live across many calls, and
  turns async generators into plain iterators. Work that must happen in the
  consumer's thread (an approval prompt, code run in the user's IPython shell) is
  sent back to it with :func:`call_in_consumer`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar, overload

from jupyter_core.utils import run_sync

__all__ = ["SyncFacade", "blocking", "BackgroundLoop", "call_in_consumer"]

T = TypeVar("T")

_consumer: contextvars.ContextVar[Callable[..., Awaitable[Any]] | None] = contextvars.ContextVar(
    "kernel_agent_consumer", default=None
)


A = TypeVar("A")
P = ParamSpec("P")
F = TypeVar("F", bound="SyncFacade[Any]")


class SyncFacade(Generic[A]):
    """The blocking twin of an async class: it owns one instance of it, :attr:`aio`.

    A subclass names the async class (``_async_class``) and declares each coroutine
    method it offers with :class:`blocking`, so a type checker sees the real
    signatures. Other attributes are read from :attr:`aio`; ``with`` calls ``start``
    and ``shutdown``.
    """

    _async_class: ClassVar[Callable[..., Any]]
    #: the async object every call goes to
    aio: A

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "aio", self._async_class(*args, **kwargs))

    def __getattr__(self, attr: str) -> Any:
        if attr == "aio":  # not set yet (copy, pickle): do not recurse
            raise AttributeError(attr)
        return getattr(self.aio, attr)

    def __enter__(self: F) -> F:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class blocking(Generic[P, T]):  # noqa: N801 (used like a decorator)
    """A coroutine method of :attr:`SyncFacade.aio`, blocking on the facade.

    ``execute = blocking(AsyncExecutor.execute)`` takes its signature from ``method``
    and calls the method of that name on the facade's async object, so one
    declaration on a base class serves every backend.
    """

    def __init__(self, method: Callable[Concatenate[Any, P], Awaitable[T]]) -> None:
        self.name = method.__name__
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> blocking[P, T]: ...

    @overload
    def __get__(self, obj: SyncFacade[Any], owner: type | None = None) -> Callable[P, T]: ...

    def __get__(
        self, obj: SyncFacade[Any] | None, owner: type | None = None
    ) -> blocking[P, T] | Callable[P, T]:
        if obj is None:
            return self
        runner: Callable[P, T] = run_sync(getattr(obj.aio, self.name))
        return runner


async def call_in_consumer(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in the thread that consumes this loop's results.

    Under :meth:`BackgroundLoop.iterate` that is the caller's thread; otherwise
    ``fn`` is simply called here. Awaitable results are awaited.
    """
    remote = _consumer.get()
    if remote is None:
        value = fn(*args)
    else:
        value = await remote(fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


class BackgroundLoop:
    """An asyncio loop running in a daemon thread for the lifetime of an object."""

    def __init__(self, name: str = "kernel-agent-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the loop and block for its result (Ctrl-C cancels it)."""
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(coro), self.loop)
        try:
            return _wait(future)
        except KeyboardInterrupt:
            future.cancel()
            _drain(future)
            raise

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Iterate an async generator from this (blocking) thread.

        On Ctrl-C or when the iterator is closed early, the generator's task is
        cancelled and allowed to clean up (its ``finally`` blocks run) before this
        returns or re-raises.
        """
        items: queue.Queue[tuple[str, Any]] = queue.Queue()
        loop = self.loop

        async def remote(fn: Callable[..., Any], *args: Any) -> Any:
            future = loop.create_future()
            items.put(("call", (fn, args, future)))
            return await future

        async def pump() -> None:
            _consumer.set(remote)
            async for item in agen:
                items.put(("item", item))

        task_future = asyncio.run_coroutine_threadsafe(pump(), loop)
        task_future.add_done_callback(lambda f: items.put(("done", None)))
        try:
            while True:
                try:
                    kind, payload = items.get(timeout=0.2)
                except queue.Empty:
                    continue
                if kind == "item":
                    yield payload
                elif kind == "call":
                    self._serve(*payload)
                else:
                    break
            task_future.result()
        except (KeyboardInterrupt, GeneratorExit):
            task_future.cancel()
            while not task_future.done() or not items.empty():
                try:
                    kind, payload = items.get(timeout=0.2)
                except queue.Empty:
                    continue
                if kind == "call":
                    fn, args, future = payload
                    loop.call_soon_threadsafe(_cancel, future)
            raise

    def _serve(
        self, fn: Callable[..., Any], args: tuple[Any, ...], future: asyncio.Future[Any]
    ) -> None:
        try:
            value = fn(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            self.loop.call_soon_threadsafe(_set_exception, future, exc)
            if isinstance(exc, KeyboardInterrupt):
                raise
            return
        self.loop.call_soon_threadsafe(_set_result, future, value)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            # as asyncio.run does: finish async generators (and the aclose() tasks their
            # finalizers scheduled) so none is destroyed pending when the loop closes
            with contextlib.suppress(Exception):
                self.run(_settle(self.loop))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    await asyncio.sleep(0)
    await loop.shutdown_asyncgens()
    pending = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
    if pending:
        await asyncio.wait(pending, timeout=1.0)


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _wait(future: Any) -> Any:
    while True:
        try:
            return future.result(timeout=0.2)
        except concurrent.futures.TimeoutError:
            continue


def _drain(future: Any) -> None:
    try:
        _wait(future)
    except BaseException:
        pass


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _cancel(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.cancel()
