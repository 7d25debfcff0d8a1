"""Run the agent's code in the current IPython shell (the ``%%agent`` magic's executor).

:class:`InProcessExecutor` implements :class:`~kernel_agent.executors.base.AsyncExecutor`
on a live ``InteractiveShell``: ipykernel's ``ZMQInteractiveShell`` in a notebook, or
terminal IPython. The code runs **unsandboxed, in the user's own namespace**: it sees
and changes the user's variables, files and environment.

How a cell runs:

- ``execute()`` is awaited on the agent's background loop, but the code must run in
  the shell's own thread (IPython and ipykernel are not thread-safe, and outputs must
  carry the right parent message). It is sent there with
  :func:`~kernel_agent.syncify.call_in_consumer`: the thread iterating ``Agent.run``
  runs ``shell.run_cell`` and hands the :class:`CellResult` back.
- For the duration of the cell the shell's display publisher, displayhook, traceback
  display and the current ``sys.stdout``/``sys.stderr`` writes are *teed*: everything
  still appears inline as usual, and a copy is turned into nbformat outputs through
  the same :class:`~kernel_agent.notebook.outputs.OutputCollector` the kernel executor uses
  (synthetic iopub-shaped messages, so stream coalescing, ``clear_output``, display
  updates and size bounds behave the same).
- ``user_expressions`` are evaluated with ``shell.user_expressions`` after the cell,
  exactly as ipykernel answers them in an ``execute_reply``.

Limits, by nature of running inside the user's process:

- timeouts are best effort: when the shell runs in the main thread and SIGINT is
  handled by Python (ipykernel and terminal IPython while a cell runs), a cell past its
  timeout gets a ``KeyboardInterrupt`` (status "timeout", state kept). Code stuck in C
  that ignores signals cannot be stopped; elsewhere no timeout is enforced.
- ``restart()`` raises :class:`~kernel_agent.errors.KernelError`: the agent cannot
  restart the kernel it is running in. ``interrupt()`` only interrupts a cell that is
  running right now (as above); ``shutdown()`` leaves the shell alone.
- a ``KeyboardInterrupt`` the executor did not send (the user pressed interrupt) is
  re-raised after the cell, so it stops the whole run, not just the cell.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import platform
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

from ..errors import ConfigError, KernelError
from ..kernel_state.namespace import NAMESPACE_EXPRESSION, VariableInfo, parse_summary
from ..notebook.bounds import RunBudget
from ..notebook.outputs import DisplayMap, OutputCollector
from ..results import CellError, CellResult
from ..syncify import call_in_consumer
from .base import Isolation, OutputCallback, check_timeout
from .cell import now

__all__ = ["InProcessExecutor", "PYTHON_KERNELSPEC"]

#: The kernelspec stored in transcripts: the code ran in a Python (IPython) process.
PYTHON_KERNELSPEC = {
    "name": "python3",
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
}

_BINARY_PREFIXES = ("image/", "application/pdf", "application/octet-stream")


class InProcessExecutor:
    """The current IPython shell as an executor. Create it in the shell's thread.

    ``store_history`` is passed to ``shell.run_cell``. It defaults to False: the
    agent's cells run nested inside the magic's own cell, and storing them would give
    each one an ``In[n]`` number, so the magic's cell would be reported under the
    last of them and the user's next cell would jump ahead. The code is kept in the
    transcript (and the magic offers it as the next input) instead.
    """

    def __init__(
        self,
        shell: Any,
        *,
        store_history: bool = False,
        max_output_chars: int = 1_000_000,
    ) -> None:
        if shell is None:
            raise ConfigError("no IPython shell: the in-process executor runs inside IPython")
        self.shell = shell
        self.store_history = store_history
        self.max_output_chars = max_output_chars
        self.display_map: DisplayMap = {}
        self.run_budget = RunBudget.for_outputs(max_output_chars)
        self.kernelspec: dict[str, Any] = dict(PYTHON_KERNELSPEC)
        self.language_info: dict[str, Any] = _language_info(shell)
        self._thread = threading.get_ident()
        self._count = 0
        self._running: _Deadline | None = None

    @property
    def cwd(self) -> Path:
        """The shell's working directory (it is the user's process)."""
        return Path.cwd()

    @property
    def kernel_cwd(self) -> Path:
        return self.cwd

    @property
    def isolation(self) -> Isolation:
        """None at all: the code runs in the user's own process, on their variables."""
        return Isolation(
            "none",
            "in-process: %agent runs the code in this kernel, on your own variables",
            "none: %agent runs the code in this kernel, on your own variables",
            warning="kernel is not sandboxed: %agent runs code in this kernel",
        )

    def make_launcher(self) -> None:
        """None: a verifying kernel is a plain local one."""
        return None

    def namespace_summary(self) -> dict[str, VariableInfo]:
        """The user's variables, summarised as the agent summarises them after each cell."""
        answer = self.shell.user_expressions({"ns": NAMESPACE_EXPRESSION})["ns"]
        return parse_summary(answer) or {}

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Nothing to start: the shell is already running."""

    async def shutdown(self) -> None:
        """Leave the user's shell running (it is not ours to stop)."""

    async def is_alive(self) -> bool:
        return True

    async def interrupt(self) -> None:
        """Interrupt the cell running right now, if it can be; otherwise do nothing."""
        deadline = self._running
        if deadline is not None:
            deadline.fire()

    async def restart(self) -> None:
        raise KernelError(
            "the in-process executor cannot restart the kernel it runs in; "
            "restart it from the front end (Kernel > Restart) if you need to"
        )

    # ----------------------------------------------------------------- execute
    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult:
        """Run ``code`` in the shell's thread and return its :class:`CellResult`.

        ``on_output`` is called on the caller's event loop with each output as it is
        produced (outputs also appear inline in the shell, as for any cell).
        """
        check_timeout(timeout)
        notify = None
        if on_output is not None:
            loop = asyncio.get_running_loop()

            def notify(node: NotebookNode) -> None:
                loop.call_soon_threadsafe(on_output, node)

        return await call_in_consumer(self.run_cell, code, timeout, notify, user_expressions)

    def run_cell(
        self,
        code: str,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> CellResult:
        """The blocking body of :meth:`execute`; call it in the shell's thread."""
        if threading.get_ident() != self._thread:
            raise KernelError(
                "in-process code must run in the IPython shell's own thread: "
                "iterate Agent.run(...) from that thread (as the %%agent magic does)"
            )
        shell = self.shell
        self._count += 1
        count = self._count
        collector = OutputCollector(
            self.max_output_chars, self.display_map, on_output, run_budget=self.run_budget
        )
        sink = _Sink(collector, count)
        sink.feed("execute_input", {"code": code, "execution_count": count})
        saved_exec_result = getattr(shell.displayhook, "exec_result", None)
        deadline = _Deadline(timeout)
        started = now()
        self._running = deadline
        try:
            with _tee(shell, sink):
                deadline.arm()
                try:
                    result = shell.run_cell(code, store_history=self.store_history)
                finally:
                    deadline.disarm()
        finally:
            self._running = None
            shell.displayhook.exec_result = saved_exec_result
        expressions = shell.user_expressions(user_expressions) if user_expressions else {}
        ended = now()
        failure = result.error_before_exec or result.error_in_exec
        status, error = "ok", None
        if failure is not None:
            status = "error"
            error = collector.error or CellError(type(failure).__name__, str(failure))
            if isinstance(failure, KeyboardInterrupt):
                if not deadline.fired:
                    raise KeyboardInterrupt  # the user's interrupt: stop the run, not just the cell
                if deadline.timed_out:
                    status = "timeout"
                    error = CellError(
                        "CellTimeoutError",
                        f"cell exceeded its {timeout:g} s timeout: it was interrupted; "
                        "kernel state is kept",
                    )
        return CellResult(
            code=code,
            status=status,  # type: ignore[arg-type]
            execution_count=count,
            outputs=collector.finish(),
            error=error,
            started=started,
            ended=ended,
            user_expressions=expressions,
        )


# ---------------------------------------------------------------------- capture
class _Sink:
    """Turns what the shell shows into iopub-shaped messages for an OutputCollector."""

    def __init__(self, collector: OutputCollector, count: int) -> None:
        self.collector = collector
        self.count = count
        self._lock = threading.Lock()  # fd-level output arrives from ipykernel's watcher thread

    def feed(self, msg_type: str, content: dict[str, Any]) -> None:
        with self._lock:
            self.collector.feed({"header": {"msg_type": msg_type}, "content": content})

    def stream(self, name: str, text: str) -> None:
        self.feed("stream", {"name": name, "text": text})

    def display(self, data: Any, metadata: Any, transient: Any, update: bool) -> None:
        content = {
            "data": _jsonable_bundle(data),
            "metadata": _jsonable(metadata or {}),
            "transient": dict(transient or {}),
        }
        self.feed("update_display_data" if update else "display_data", content)

    def result(self, data: Any, metadata: Any) -> None:
        content = {
            "data": _jsonable_bundle(data),
            "metadata": _jsonable(metadata or {}),
            "execution_count": self.count,
        }
        self.feed("execute_result", content)

    def error(self, etype: Any, evalue: Any, stb: Any) -> None:
        name = getattr(etype, "__name__", str(etype))
        self.feed(
            "error",
            {"ename": name, "evalue": str(evalue), "traceback": [str(s) for s in stb or []]},
        )


@contextlib.contextmanager
def _tee(shell: Any, sink: _Sink) -> Iterator[None]:
    """Copy what ``shell`` shows into ``sink`` while it still shows it as usual."""
    pub, hook = shell.display_pub, shell.displayhook

    def muted() -> bool:
        # terminal IPython prints displays, results and tracebacks to stdout too:
        # those are recorded whole, from the hooks below, not as stream text
        return bool(
            getattr(pub, "is_publishing", False)
            or getattr(hook, "is_active", False)
            or getattr(shell, "showing_traceback", False)
        )

    def publish(original: Any) -> Any:
        def wrapper(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
            value = original(data, metadata, *args, **kwargs)
            sink.display(data, metadata, kwargs.get("transient"), bool(kwargs.get("update")))
            return value

        return wrapper

    def clear_output(original: Any) -> Any:
        def wrapper(wait: bool = False) -> Any:
            value = original(wait)
            sink.feed("clear_output", {"wait": bool(wait)})
            return value

        return wrapper

    def write_format_data(original: Any) -> Any:
        def wrapper(format_dict: Any, md_dict: Any = None) -> Any:
            value = original(format_dict, md_dict)
            sink.result(format_dict, md_dict)
            return value

        return wrapper

    def showtraceback(original: Any) -> Any:
        def wrapper(etype: Any, evalue: Any, stb: Any) -> Any:
            value = original(etype, evalue, stb)
            sink.error(etype, evalue, stb)
            return value

        return wrapper

    def write(name: str, original: Any) -> Any:
        def wrapper(data: Any, *args: Any, **kwargs: Any) -> Any:
            value = original(data, *args, **kwargs)
            if data and isinstance(data, str) and not muted():
                sink.stream(name, data)
            return value

        return wrapper

    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(pub, "publish", publish))
        stack.enter_context(_patched(pub, "clear_output", clear_output))
        stack.enter_context(_patched(hook, "write_format_data", write_format_data))
        stack.enter_context(_patched(shell, "_showtraceback", showtraceback))
        stack.enter_context(_patched(sys.stdout, "write", lambda w: write("stdout", w)))
        stack.enter_context(_patched(sys.stderr, "write", lambda w: write("stderr", w)))
        yield


@contextlib.contextmanager
def _patched(obj: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """Replace ``obj.name`` by ``make(original)`` on the instance, and put it back."""
    had_own = name in getattr(obj, "__dict__", {})
    original = getattr(obj, name)
    try:
        setattr(obj, name, make(original))
    except (AttributeError, TypeError):  # a stream without an instance dict: leave it
        yield
        return
    try:
        yield
    finally:
        if had_own:
            setattr(obj, name, original)
        else:
            with contextlib.suppress(AttributeError):
                delattr(obj, name)


def _jsonable_bundle(data: Any) -> dict[str, Any]:
    """A mime bundle as JSON values (binary data base64, as ipykernel sends it)."""
    out: dict[str, Any] = {}
    for mime, value in dict(data or {}).items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
            if mime.startswith(_BINARY_PREFIXES) and mime != "image/svg+xml":
                out[mime] = base64.b64encode(raw).decode("ascii")
            else:
                out[mime] = raw.decode("utf-8", "replace")
        else:
            out[mime] = _jsonable(value)
    return out


def _jsonable(value: Any) -> Any:
    """A detached, JSON-safe copy (the transcript must not alias the user's objects)."""
    return json.loads(json.dumps(value, default=str))


# --------------------------------------------------------------------- timeouts
class _Deadline:
    """Sends the shell's (main) thread a KeyboardInterrupt when time is up.

    Only armed when the shell runs in the main thread and SIGINT is handled by
    Python's default handler, so the signal becomes a ``KeyboardInterrupt`` and never
    kills the process. A lock orders firing against disarming, so no interrupt is
    sent once the cell has returned.
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.fired = False
        self.timed_out = False
        self._lock = threading.Lock()
        self._live = False
        self._timer: threading.Timer | None = None

    @staticmethod
    def possible() -> bool:
        return (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        )

    def arm(self) -> None:
        if not self.possible():
            return
        with self._lock:
            self._live = True
        if self.timeout is not None:
            self._timer = threading.Timer(self.timeout, self._time_up)
            self._timer.daemon = True
            self._timer.start()

    def _time_up(self) -> None:
        with self._lock:
            if self._live:
                self.timed_out = True
        self.fire()

    def fire(self) -> None:
        with self._lock:
            if not self._live:
                return
            self._live = False
            self.fired = True
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._live = False
            fired = self.fired
        if fired:
            # the KeyboardInterrupt may still be pending: take it here, not in the caller
            with contextlib.suppress(KeyboardInterrupt):
                for _ in range(1000):
                    os.getpid()


def _language_info(shell: Any) -> dict[str, Any]:
    kernel = getattr(shell, "kernel", None)
    info = getattr(kernel, "language_info", None)
    if isinstance(info, dict) and info.get("name"):
        return dict(info)
    return {
        "name": "python",
        "version": platform.python_version(),
        "mimetype": "text/x-python",
        "codemirror_mode": {"name": "ipython", "version": 3},
        "pygments_lexer": "ipython3",
        "nbconvert_exporter": "python",
        "file_extension": ".py",
    }
