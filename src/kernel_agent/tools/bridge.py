"""The host end of the kernel's ``call_tool``, ``set_result`` and ``install_package``.

The kernel publishes a request as a ``comm_msg`` on iopub while its cell runs; the
executor's message loop hands it to :meth:`HostBridge.feed`, which answers at once
with an ``ack`` (so the kernel knows someone listens) and then with the outcome, as
``comm_msg``s on shell addressed to the kernel's reply subshell. Nothing but the
kernel's own channels is used, so this works in the sandbox (no network) and through
a gateway's websocket alike.

Tools are plain functions; sync ones run in threads, so a batch from
``call_tools_parallel`` runs concurrently. Per call: a timeout, a JSON-serialisable
result of bounded size; a raising tool becomes a ``ToolError`` in the kernel carrying
its message. Each call is recorded (tool, bounded arguments, duration, ok or error)
for the cell's transcript metadata.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from .registry import Tool

if TYPE_CHECKING:
    from ..executors.base import CommKernel

__all__ = ["BridgeLimits", "HostBridge", "kernel_init_code"]

#: the reply's ``error_type`` for a call that ran out of time
TIMEOUT = "ToolTimeout"
#: an answer ready within this long goes without an ``ack`` before it (the answer
#: acknowledges too): one message less on the hot path
_ACK_AFTER_S = 0.02


@dataclass(frozen=True)
class BridgeLimits:
    timeout_s: float = 60.0  # per tool call
    max_result_bytes: int = 1_000_000  # one result, as JSON
    max_request_bytes: int = 1_000_000  # one request's arguments, as JSON
    max_batch: int = 64  # calls in one call_tools_parallel
    record_args_chars: int = 200  # arguments as the transcript records them
    max_records: int = 200  # calls recorded per cell (the rest are counted)
    max_in_flight: int = 256  # requests being answered at once (the rest are refused)


def kernel_init_code(
    *,
    listening: bool,
    timeout_s: float = 60.0,
    site: str | None = None,
    rerun: dict[str, Any] | None = None,
) -> str:
    """The Python run silently at kernel start: defines the kernel-side helpers.

    ``listening`` False makes every request fail at once with a clear message;
    ``rerun`` (a verify re-run: ``{"installs": {name: version}}``) makes ``call_tool``
    fail so, ``set_result`` a no-op and ``install_package`` accept what was recorded.
    ``site`` is a directory put on ``sys.path`` (the session's installs).
    """
    source = files(__package__).joinpath("kernel_side.py").read_text(encoding="utf-8")
    config: dict[str, Any] = {"listening": listening, "timeout": timeout_s, "rerun": rerun}
    lines = [
        source,
        f"globals().update(__kernel_agent_setup({config!r}))",
        "del __kernel_agent_setup",
    ]
    if site:
        lines.append(f"__import__('sys').path.insert(0, {site!r})")
    return "\n".join(lines) + "\n"


Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class HostBridge:
    """Answers one kernel's requests. ``handlers`` maps extra ops (``set_result``,
    ``install``) to coroutines taking the request and returning its value (raise to
    refuse: the exception's message reaches the kernel)."""

    def __init__(
        self,
        tools: dict[str, Tool],
        limits: BridgeLimits = BridgeLimits(),
        handlers: dict[str, Handler] | None = None,
    ) -> None:
        self.tools = tools
        self.limits = limits
        self.handlers = dict(handlers or {})
        self.executor: CommKernel | None = None
        self._records: list[dict[str, Any]] = []
        self._unrecorded = 0  # calls past max_records since the last take
        self._refused = 0  # requests refused since the last take (too many in flight)
        self._tasks: set[asyncio.Task[None]] = set()
        # a whole batch runs at once (the loop's default pool has cores + 4 threads);
        # threads are made as needed
        self._pool = ThreadPoolExecutor(limits.max_batch, thread_name_prefix="host-tool")

    # ---------------------------------------------------------------- wiring
    async def attach(self, executor: CommKernel, *, site: str | None = None) -> None:
        """Listen to ``executor``'s comm messages and inject the kernel-side helpers."""
        self.executor = executor
        executor.comm_handler = self.feed
        code = kernel_init_code(listening=True, timeout_s=self.limits.timeout_s, site=site)
        await executor.inject(code)

    def close(self) -> None:
        """Stop taking calls; a tool still running in a thread is left to finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def take_records(self) -> list[dict[str, Any]]:
        """The calls recorded since the last take (for one cell's metadata).

        At most ``max_records``: :meth:`take_left_out` counts the rest.
        """
        records, self._records = self._records, []
        return records

    def take_left_out(self) -> dict[str, int]:
        """Since the last take: calls not recorded (past ``max_records``) and requests
        refused (past ``max_in_flight``); only the non-zero counts."""
        counts = {"unrecorded": self._unrecorded, "refused": self._refused}
        self._unrecorded = self._refused = 0
        return {k: v for k, v in counts.items() if v}

    def feed(self, msg: dict[str, Any]) -> None:
        """One comm message from the kernel (called from the executor's message loop).

        The message is the kernel's: one of the wrong shape is ignored, never raised.
        Past ``max_in_flight`` requests being answered, a new one is refused at once.
        """
        request = _request(msg)
        if request is None:
            return
        comm_id, data = request
        if len(self._tasks) >= self.limits.max_in_flight:
            self._refused += 1
            data = {**data, "op": "busy"}
        task = asyncio.ensure_future(self._serve(comm_id, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply(self, comm_id: str, data: dict[str, Any], request: dict[str, Any]) -> None:
        if self.executor is not None:
            await self.executor.send_comm(
                comm_id, {"id": request["id"], **data}, request.get("subshell_id")
            )

    async def _serve(self, comm_id: str, request: dict[str, Any]) -> None:
        """Answer one request; an ``ack`` first unless the answer is ready within 20 ms."""
        work = asyncio.ensure_future(self._outcome(request))
        done, _ = await asyncio.wait({work}, timeout=_ACK_AFTER_S)
        if not done:
            await self._reply(comm_id, {"op": "ack"}, request)
        await self._reply(comm_id, {"op": "reply", **await work}, request)

    async def _outcome(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        try:
            if op == "busy":
                reply = {"ok": False, "error": "too many requests at once; try again"}
            elif op == "call":
                calls = request.get("calls") or []
                if not isinstance(calls, list):
                    raise TypeError("calls must be a list")
                reply = await self._calls(calls)
            elif op in self.handlers:
                started = time.monotonic()
                try:
                    value = await self.handlers[op](request)
                    reply = {"ok": True, "value": value}
                except Exception as exc:  # the kernel gets the message
                    reply = _failure(exc)
                self._record(op, {k: request.get(k) for k in ("name", "files")}, started, reply)
            else:
                reply = {"ok": False, "error": f"{op} is not available in this session"}
        except Exception as exc:  # never leave the kernel waiting
            reply = _failure(exc)
        return reply

    async def _calls(self, calls: list[dict[str, Any]]) -> dict[str, Any]:
        if len(calls) > self.limits.max_batch:
            fail = {"ok": False, "error": f"at most {self.limits.max_batch} calls in one batch"}
            return {"ok": True, "results": [fail] * len(calls)}
        results = await asyncio.gather(*(self._call(c) for c in calls))
        return {"ok": True, "results": list(results)}

    async def _call(self, call: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        if not isinstance(call, dict) or not isinstance(call.get("kwargs") or {}, dict):
            reply = {"ok": False, "error": "a call is {'tool': name, 'kwargs': {...}}"}
            self._record("?", None, started, reply)
            return reply
        name, kwargs = str(call.get("tool", ""))[:200], call.get("kwargs") or {}
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            reply = {"ok": False, "error": f"no host tool named {name!r} (the tools: {known})"}
        elif len(json.dumps(kwargs, default=str)) > self.limits.max_request_bytes:
            reply = {"ok": False, "error": f"{name}: the arguments are too large"}
        else:
            reply = await self._run(tool, kwargs)
        self._record(name, kwargs, started, reply)
        return reply

    async def _run(self, tool: Tool, kwargs: dict[str, Any]) -> dict[str, Any]:
        timeout = self.limits.timeout_s
        try:
            if tool.is_async:
                value = await asyncio.wait_for(tool.fn(**kwargs), timeout)
            else:  # a thread cannot be stopped: on timeout it is left to finish
                loop = asyncio.get_running_loop()
                call = functools.partial(tool.fn, **kwargs)
                value = await asyncio.wait_for(loop.run_in_executor(self._pool, call), timeout)
        except asyncio.TimeoutError:
            return {
                "ok": False,
                "error_type": TIMEOUT,
                "error": f"{tool.name} did not finish within {timeout:g} s",
            }
        except Exception as exc:
            return _failure(exc, tool.name)
        try:
            text = json.dumps(value)
        except (TypeError, ValueError) as exc:
            return {"ok": False, "error": f"{tool.name} returned a value that is not JSON: {exc}"}
        if len(text) > self.limits.max_result_bytes:
            return {
                "ok": False,
                "error": f"{tool.name}'s result is {len(text)} bytes as JSON, "
                f"over the {self.limits.max_result_bytes} byte bound",
            }
        return {"ok": True, "value": value}

    def _record(self, tool: str, args: Any, started: float, reply: dict[str, Any]) -> None:
        if len(self._records) >= self.limits.max_records:
            self._unrecorded += 1
            return
        try:
            text = json.dumps(args, default=str)
        except (TypeError, ValueError, RecursionError):
            text = "(not JSON)"
        cap = self.limits.record_args_chars
        record: dict[str, Any] = {
            "tool": tool,
            "args": text if len(text) <= cap else text[: cap - 3] + "...",
            "duration_s": round(time.monotonic() - started, 4),
            "ok": bool(reply.get("ok")),
        }
        if not reply.get("ok"):
            record["error"] = str(reply.get("error", ""))[:300]
        self._records.append(record)


def _request(msg: Any) -> tuple[str, dict[str, Any]] | None:
    """(comm id, request) of a well-formed helper request, else None."""
    if not isinstance(msg, dict):
        return None
    header = msg.get("header")
    msg_type = msg.get("msg_type", header.get("msg_type") if isinstance(header, dict) else None)
    content = msg.get("content")
    if msg_type != "comm_msg" or not isinstance(content, dict):
        return None
    data = content.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("op"), str):
        return None
    if not isinstance(data.get("id"), (str, int)) or isinstance(data.get("id"), bool):
        return None
    subshell = data.get("subshell_id")
    if subshell is not None and not isinstance(subshell, str):
        return None
    return str(content.get("comm_id", ""))[:200], data


def _failure(exc: BaseException, tool: str | None = None) -> dict[str, Any]:
    message = str(exc) or type(exc).__name__
    prefix = f"{tool} raised {type(exc).__name__}: " if tool else ""
    return {"ok": False, "error": prefix + message}
