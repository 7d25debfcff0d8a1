"""A kernel on a Jupyter Kernel Gateway or Enterprise Gateway: :class:`AsyncGatewaySession`.

Same interface, statuses and outputs as the local
:class:`~kernel_agent.executors.kernel.AsyncKernelSession`; the kernel lives
wherever the gateway puts it (a process beside Kernel Gateway, a pod that
Enterprise Gateway launches on Kubernetes). REST starts, interrupts, restarts and
deletes it; its messages go over the ``/api/kernels/{id}/channels`` websocket; both
carry ``Authorization: token ...``.

- A cell finishes when ``idle`` and ``execute_reply`` for our request have arrived.
- While a cell runs, the gateway is asked about the kernel once a second; a
  ``restarting``/``dead`` status or a vanished kernel ends the cell as "died". How
  fast the gateway notices a dead kernel is its ``KernelRestarter.time_to_dead``
  (3 s by default).
- A kernel is ready (after start or any restart) only once a ``kernel_info_request``
  has been answered on shell *and* seen on iopub: the gateway's iopub link to a
  restarted kernel rejoins a moment after its shell link, and whatever the kernel
  publishes before that is gone for good (a cell's ``idle`` among it).
- A cell quiet for a second gets a ``kernel_info_request`` sent behind it. Shell
  requests run in order and iopub keeps its order, so when that request is answered
  (or seen on iopub) before the cell's own reply (or ``idle``), the cell's end was
  lost, and it ends as "lost" instead of waiting forever.
- A dropped websocket is reopened with the same session id, and the gateway replays
  what it buffered meanwhile; the kernel and its state are untouched. A websocket
  silent for 10 s is pinged; one silent for 30 s counts as dropped.
- ``kernel_id=`` attaches to a kernel that already runs (one kept by an earlier
  run with ``keep_kernel=True``), so a session can outlive the process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import (
    AuthRefused,
    ConfigError,
    GatewayError,
    KernelDied,
    KernelStartError,
    SendFailed,
    Unreachable,
)
from ..notebook.outputs import OutputCollector
from ..syncify import blocking
from .base import Isolation, SyncExecutor
from .cell import KernelProtocolExecutor, Outcome, take_reply
from .follow_up import QUIET_S, FollowUp
from .gateway_client import Channels, Disconnected, GatewayREST, ws_url
from .gateway_wire import new_message
from .late_output import LateOutput

if TYPE_CHECKING:
    from ..remote.work import RemoteWork

__all__ = ["AsyncGatewaySession", "GatewaySession"]

log = logging.getLogger(__name__)

_ALIVE_CHECK_S = 1.0
#: how long a kernel that answers kernel_info may stay silent on iopub before we go on
_IOPUB_JOIN_S = 5.0
#: websocket silence before a ping, and before it counts as dropped
_WS_PING_S = 10.0
_WS_DEAD_S = 30.0


class AsyncGatewaySession(KernelProtocolExecutor):
    """A kernel on a gateway that keeps its state across ``execute`` calls.

    ``url`` is the gateway's base URL (``http://host:8888``, a path prefix is kept);
    ``token`` its auth token. ``kernel_name`` is a kernelspec the gateway offers
    (None: the gateway's default). ``kernel_id`` attaches to a running kernel instead
    of starting one. ``keep_kernel`` leaves the kernel running at ``shutdown``
    (default: keep an attached kernel, delete one we started). ``env`` is sent with
    the start request (gateways pass on only ``KERNEL_*`` and whitelisted names).
    ``reconnect_timeout`` is how long a dropped websocket is retried before a
    :class:`~kernel_agent.errors.GatewayError`.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        kernel_name: str | None = None,
        *,
        kernel_id: str | None = None,
        keep_kernel: bool | None = None,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
        request_timeout: float = 30.0,
        reconnect_timeout: float = 5.0,
        max_output_chars: int = 1_000_000,
        interrupt_grace: float = 3.0,
        restart_on_death: bool = True,
    ) -> None:
        if not url:
            raise ConfigError("no gateway URL: set --gateway-url or KERNEL_AGENT_GATEWAY_URL")
        super().__init__(
            startup_timeout=startup_timeout,
            max_output_chars=max_output_chars,
            interrupt_grace=interrupt_grace,
            restart_on_death=restart_on_death,
        )
        self.rest = GatewayREST(url, token, request_timeout)
        self.url = self.rest.url
        self.kernel_name = kernel_name
        self.kernel_id = kernel_id
        self.keep_kernel = (kernel_id is not None) if keep_kernel is None else keep_kernel
        self.env = dict(env or {})
        self.reconnect_timeout = reconnect_timeout
        self.session_id = uuid.uuid4().hex
        self._channels: Channels | None = None
        self._death: str | None = None  # why the kernel was found dead/restarted
        #: the header ``session`` of the running kernel's own messages (None: not known,
        #: or the kernel echoes its clients' session ids, so a change would mean nothing)
        self._kernel_session: str | None = None
        self._reconnects: list[float] = []  # when the websocket was last reopened
        #: the kernel's own work dir and its files, set up after every (re)start
        self.files: RemoteWork | None = None

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start (or attach to) the kernel and wait until it answers ``kernel_info``."""
        if self._channels is not None:
            return
        specs = await self.rest.kernelspecs()
        started_here = False
        if self.kernel_id is not None:
            model = await self.rest.kernel(self.kernel_id)
            if model is None:
                raise GatewayError(f"the gateway at {self.url} has no kernel {self.kernel_id}")
            self.kernel_name = model.get("name") or self.kernel_name
        else:
            name = self.kernel_name or specs.get("default") or ""
            if name not in specs["kernelspecs"]:
                offered = ", ".join(sorted(specs["kernelspecs"])) or "none"
                raise GatewayError(
                    f"the gateway at {self.url} has no kernelspec {name!r} (it offers: {offered})"
                )
            self.kernel_name = name
            # A gateway replaces the kernel's whole environment when a start request
            # carries one, so send env only when asked to.
            env = {"KERNEL_LAUNCH_TIMEOUT": str(int(self.startup_timeout)), **self.env}
            model = await self.rest.start_kernel(
                name, env if self.env else {}, self.startup_timeout
            )
            self.kernel_id = model["id"]
            started_here = True
        spec = (specs["kernelspecs"].get(self.kernel_name) or {}).get("spec", {})
        self.kernelspec = {
            "name": self.kernel_name,
            "display_name": spec.get("display_name", self.kernel_name),
            "language": spec.get("language", ""),
        }
        try:
            await self._open_channels()
            reply = await self._kernel_info(self.startup_timeout)
        except BaseException:
            await self._close_channels()
            if started_here and not self.keep_kernel:
                await self._delete_quietly()
                self.kernel_id = None
            raise
        await self._ready(reply)
        log.info("gateway kernel %s (%s) at %s", self.kernel_id, self.kernel_name, self.url)

    async def shutdown(self) -> None:
        """Close the connection; delete the kernel unless ``keep_kernel``. Safe to call twice."""
        await self._close_channels()
        if self.kernel_id is not None and not self.keep_kernel:
            await self._delete_quietly()
            self.kernel_id = None

    @property
    def cwd(self) -> None:
        """None: the kernel's files are on the gateway's machine."""
        return None

    @property
    def kernel_cwd(self) -> None:
        return None

    @property
    def isolation(self) -> Isolation:
        """Whatever the gateway gives its kernels; nothing this side can tell."""
        return Isolation("remote", "Jupyter gateway", f"remote kernel on {self.url}")

    def make_launcher(self) -> None:
        """None: a verifying kernel is a local one, with no launcher of ours."""
        return None

    async def is_alive(self) -> bool:
        if self.kernel_id is None:
            return False
        try:
            model = await self.rest.kernel(self.kernel_id)
        except GatewayError:
            return False
        return model is not None and model.get("execution_state") != "dead"

    async def interrupt(self) -> None:
        """Ask the gateway to interrupt the kernel (a failure is logged: a restart follows)."""
        try:
            await self.rest.kernel_action(self._id(), "interrupt")
        except AuthRefused:
            raise
        except GatewayError as exc:
            log.warning("%s", exc)

    async def restart(self) -> None:
        """Restart the kernel through the gateway (state is lost); the websocket stays."""
        await self.rest.kernel_action(self._id(), "restart", timeout=self.startup_timeout)
        self.display_map.clear()
        await self._await_ready()

    def _id(self) -> str:
        if self.kernel_id is None or self._channels is None:
            raise KernelDied("the gateway kernel is not running (session not started or shut down)")
        return self.kernel_id

    # ----------------------------------------------------------------- execute
    @property
    def _connected(self) -> bool:
        return self._channels is not None

    async def _before_cell(self) -> bool:
        """A kernel the gateway restarted while we were idle: wait for (or do) the restart."""
        if not self._drain_between_cells():
            return False
        await self._recover_from_death()
        return True

    def _forget(self, msg_id: str) -> None:
        if self._channels is not None:
            self._channels.expected.discard(msg_id)

    async def _collect(
        self, msg_id: str, collector: OutputCollector, deadline: float | None
    ) -> Outcome:
        """Feed messages for ``msg_id`` to ``collector`` until idle + reply (see cell.Outcome)."""
        idle = reply = False
        reply_status = "ok"
        reconnected = False
        idle_seen = 0  # REST checks in a row that saw the kernel idle while we still wait
        unreachable_since: float | None = None
        next_check = time.monotonic() + _ALIVE_CHECK_S
        last_msg = time.monotonic()  # when a message for this cell last arrived
        follow_up: FollowUp | None = None
        channels = self._channels  # its reader thread counts the frames it dropped
        dropped_before = channels.malformed if channels is not None else 0
        try:
            while not (idle and reply):
                now_ = time.monotonic()
                if deadline is not None and now_ >= deadline:
                    return "timeout"
                if follow_up is not None and follow_up.cell_end_lost(reply, now_):
                    log.warning(
                        "gateway kernel %s: the end of cell %s was lost", self.kernel_id, msg_id
                    )
                    return "lost"
                if now_ >= next_check:
                    try:
                        model = await self._probe()
                        unreachable_since = None
                    except Unreachable:
                        unreachable_since = unreachable_since or now_
                        if now_ - unreachable_since > self.reconnect_timeout:
                            raise
                        model = {}
                    if model is None:
                        return "died"
                    idle_seen = idle_seen + 1 if model.get("execution_state") == "idle" else 0
                    if reconnected and idle_seen >= 2:
                        return "lost"
                    if not self._websocket_alive():
                        if not await self._reconnect("the websocket went silent"):
                            return "died"
                        reconnected, idle_seen = True, 0
                    next_check = time.monotonic() + _ALIVE_CHECK_S
                if follow_up is None and now_ - last_msg >= QUIET_S:
                    follow_up = FollowUp(await self._send_request("kernel_info_request", {}))
                elif follow_up is not None and follow_up.due(now_):
                    follow_up.resent(await self._send_request("kernel_info_request", {}))
                if follow_up is None:
                    wake = min(next_check, last_msg + QUIET_S)
                elif follow_up.answered_at is None:
                    wake = min(next_check, follow_up.sent_at + follow_up.resend_after)
                else:
                    wake = next_check
                if deadline is not None:
                    wake = min(wake, deadline)
                item = await self._inbox.get(wake - now_)
                if item is None:
                    continue
                if isinstance(item, Disconnected):
                    if not await self._reconnect(item.reason):
                        return "died"
                    reconnected, idle_seen = True, 0
                    continue
                if self._from_another_kernel(item):
                    return "died"
                parent = item["parent_header"].get("msg_id")
                if follow_up is not None and parent in follow_up.ids():
                    follow_up.feed(item)
                    continue
                if parent != msg_id:
                    if self._is_death(item):
                        return "died"
                    continue
                idle_seen, last_msg = 0, time.monotonic()
                if item["channel"] == "iopub":
                    idle = self._take_iopub(item, collector, idle)
                elif item["channel"] == "shell" and item["msg_type"] == "execute_reply":
                    reply = True
                    reply_status = take_reply(collector, item["content"])
            await self._late_output(msg_id, collector)
        finally:
            if follow_up is not None and self._channels is not None:
                self._channels.expected.difference_update(follow_up.ids())
            if channels is not None:
                collector.malformed += max(0, channels.malformed - dropped_before)
        return "ok" if reply_status == "ok" else "reply_error"

    async def _late_output(self, msg_id: str, collector: OutputCollector) -> None:
        """Output for the cell published after its idle (late_output); anything else waits."""
        late = LateOutput(self.late_output_s).open(time.monotonic())
        while (left := late.closes_at() - time.monotonic()) > 0:
            item = await self._inbox.get(left)
            ours = isinstance(item, dict) and item["parent_header"].get("msg_id") == msg_id
            if not (ours and item["channel"] == "iopub"):
                self._inbox.put_back(item)  # None: the window passed quietly
                return
            self._take_iopub(item, collector, True)
            late.heard(time.monotonic())

    def _websocket_alive(self) -> bool:
        """False if nothing came over the websocket for ``_WS_DEAD_S``; pings it when quiet."""
        channels = self._channels
        if channels is None or channels.closed:
            return True  # a closed websocket is reported (and reopened) on its own
        silent = time.monotonic() - channels.last_heard
        if silent >= _WS_DEAD_S:
            return False
        if silent >= _WS_PING_S:
            channels.ping()
        return True

    async def _probe(self) -> dict[str, Any] | None:
        """The kernel's model from the gateway, or None (noting why) if it is dead or gone."""
        model = await self.rest.kernel(self._id())
        if model is None:
            self._death = "the gateway no longer knows the kernel"
            return None
        state = model.get("execution_state")
        if state in ("dead", "restarting"):
            self._death = f"the gateway reports it {state}"
            return None
        return model

    def _from_another_kernel(self, msg: dict[str, Any]) -> bool:
        """True (noting why) if ``msg`` came from a kernel process other than the one we
        readied: the kernel was restarted (a REST restart says nothing on the websocket,
        and the new kernel's first statuses can be lost before the server's link joins)."""
        session = msg.get("header", {}).get("session")
        if self._kernel_session is None or not session or session == self._kernel_session:
            return False
        if msg["channel"] == "shell" or msg["msg_type"] == "status":
            self._death = "restarting: a new kernel process answers in its place"
            return True
        return False  # the server's own notes (an iopub rate limit) carry its session

    def _is_death(self, msg: dict[str, Any]) -> bool:
        if msg["msg_type"] != "status":
            return False
        state = msg["content"].get("execution_state")
        if state in ("restarting", "dead"):
            self._death = f"the gateway reported it {state}"
            return True
        return False

    async def _exit_reason(self) -> str:
        return self._death or "exit status unknown"

    async def _recover_from_death(self) -> bool:
        """After a death: wait for the gateway's own restart, or restart (or replace) the kernel."""
        death, self._death = self._death or "", None
        self.display_map.clear()
        if await self.rest.kernel(self._id()) is None:
            return await self._replace_kernel(death)
        if "restarting" in death:
            try:
                await self._await_ready()
                return True
            except KernelStartError as exc:
                if await self.rest.kernel(self._id()) is None:
                    return await self._replace_kernel(str(exc))
        if not self.restart_on_death:
            return "restarting" in death
        await self.restart()
        return True

    async def _replace_kernel(self, death: str) -> bool:
        """Start a new kernel in place of one the gateway no longer knows (if allowed)."""
        if not self.restart_on_death:
            return False
        log.warning("gateway kernel %s is gone (%s); starting a new one", self.kernel_id, death)
        await self._close_channels()
        self.kernel_id, self.keep_kernel = None, False
        await self.start()
        return True

    def _drain_between_cells(self) -> bool:
        """Drop stale inbox items; True if the gateway restarted the kernel while we were idle."""
        restarted = False
        while (item := self._inbox.pop_nowait()) is not None:
            if isinstance(item, Disconnected):
                self._channels.closed = True  # type: ignore[union-attr]
            elif self._is_death(item):
                restarted = True
        return restarted

    # ----------------------------------------------------------------- messages
    @property
    def _inbox(self) -> Any:
        assert self._channels is not None
        return self._channels.inbox

    @property
    def _expected(self) -> set[str]:
        assert self._channels is not None
        return self._channels.expected

    async def _send_request(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send a shell request; returns its msg_id (whose replies now reach the inbox)."""
        channels = self._channels
        assert channels is not None
        msg = new_message(msg_type, content, self.session_id)
        self._expected.add(msg["msg_id"])
        for attempt in range(2):
            if channels.closed:
                await self._reconnect("the websocket was closed")
            try:
                channels.send("shell", msg)
                return str(msg["msg_id"])
            except SendFailed as exc:
                if attempt:
                    raise GatewayError(
                        f"cannot send to the gateway kernel at {self.url}: {exc}"
                    ) from None
        raise AssertionError("unreachable")

    async def _kernel_info(self, timeout: float) -> dict[str, Any]:
        """Ask kernel_info until it is answered on shell and seen on iopub; return the reply.

        A kernel still starting may drop early requests, so they are repeated. The
        iopub check matters after a restart: the gateway's iopub link rejoins the new
        kernel a moment after its shell link, and what is published before is lost.
        """
        deadline = time.monotonic() + timeout
        sent: set[str] = set()
        reply: dict[str, Any] | None = None
        replied_at, published = 0.0, False
        every = 0.1  # resend interval, doubling up to 1 s
        next_check = time.monotonic() + _ALIVE_CHECK_S
        try:
            while not (reply is not None and published):
                now_ = time.monotonic()
                if now_ >= deadline or (reply is not None and now_ - replied_at >= _IOPUB_JOIN_S):
                    break
                if reply is None and now_ >= next_check:
                    await self._check_not_gone()
                    next_check = time.monotonic() + _ALIVE_CHECK_S
                sent.add(await self._send_request("kernel_info_request", {}))
                resend = min(deadline, time.monotonic() + every)
                every = min(every * 2, 1.0)
                while (left := resend - time.monotonic()) > 0:
                    if reply is not None and published:
                        break
                    item = await self._inbox.get(left)
                    if isinstance(item, Disconnected):
                        if not await self._reconnect(item.reason):
                            await self._check_not_gone()
                    elif item is not None and item["parent_header"].get("msg_id") in sent:
                        if item["channel"] == "iopub":
                            published = True
                        elif item["msg_type"] == "kernel_info_reply" and reply is None:
                            reply, replied_at, every = dict(item["content"]), time.monotonic(), 0.1
                            session = item.get("header", {}).get("session")
                            echoed = not isinstance(session, str) or session == self.session_id
                            self._kernel_session = None if echoed else session
        finally:
            for msg_id in sent:
                self._expected.discard(msg_id)
        if reply is None:
            raise KernelStartError(
                f"gateway kernel {self.kernel_id} did not answer kernel_info within {timeout:g} s"
            )
        if not published:
            log.warning(
                "gateway kernel %s answers on shell but nothing reaches us on iopub", self.kernel_id
            )
        return reply

    async def _check_not_gone(self) -> None:
        """Raise KernelStartError if the gateway no longer has the kernel, or reports it dead."""
        model = await self.rest.kernel(self._id())
        if model is None:
            self._death = "the gateway no longer knows the kernel"
        elif model.get("execution_state") == "dead":
            self._death = "the gateway reports it dead"
        else:
            return
        raise KernelStartError(f"gateway kernel {self.kernel_id} is not coming back: {self._death}")

    async def _await_ready(self) -> None:
        await self._ready(await self._kernel_info(self.startup_timeout))

    async def _ready(self, info: dict[str, Any]) -> None:
        await super()._ready(info)
        if self.files is not None:
            await self.files.ready()

    async def send_comm(self, comm_id: str, data: dict[str, Any], subshell_id: str | None) -> None:
        channels = self._channels
        if channels is None:
            return
        msg = new_message("comm_msg", {"comm_id": comm_id, "data": data}, self.session_id)
        if subshell_id:
            msg["header"]["subshell_id"] = subshell_id
        try:
            channels.send("shell", msg)
        except SendFailed as exc:
            log.warning("could not send a comm reply to the gateway kernel: %s", exc)

    # ----------------------------------------------------------------- connection
    async def _open_channels(self) -> None:
        assert self.kernel_id is not None
        if self._channels is None:
            url = ws_url(self.url, f"/api/kernels/{self.kernel_id}/channels")
            self._channels = Channels(url, self.rest.headers, self.session_id)
        channels = self._channels
        timeout = self.rest.request_timeout
        await asyncio.to_thread(channels.connect, timeout, self.rest.auth_failure)

    async def _reconnect(self, reason: str) -> bool:
        """Reopen the websocket, retrying ``reconnect_timeout`` s; False if the kernel is gone."""
        assert self._channels is not None and self.kernel_id is not None
        log.warning("gateway websocket dropped (%s); reconnecting", reason)
        self._channels.close()
        recent = [t for t in self._reconnects if t > time.monotonic() - 10.0]
        self._reconnects = [*recent, time.monotonic()]
        if len(recent) >= 5:
            raise GatewayError(
                f"the gateway at {self.url} keeps closing the kernel websocket ({reason})"
            )
        deadline = time.monotonic() + self.reconnect_timeout
        delay = 0.05
        while True:
            try:
                if await self.rest.kernel(self.kernel_id) is None:
                    self._death = "the gateway no longer knows the kernel"
                    return False
                await self._open_channels()
                return True
            except Unreachable as exc:
                if time.monotonic() + delay > deadline:
                    raise GatewayError(
                        f"lost the connection to the gateway at {self.url} and could not "
                        f"reconnect within {self.reconnect_timeout:g} s ({exc})"
                    ) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _close_channels(self) -> None:
        channels, self._channels = self._channels, None
        if channels is not None:
            await asyncio.to_thread(channels.close)

    async def _delete_quietly(self) -> None:
        try:
            await self.rest.delete_kernel(self.kernel_id or "")
        except GatewayError as exc:
            log.warning("could not delete gateway kernel %s: %s", self.kernel_id, exc)


class GatewaySession(SyncExecutor[AsyncGatewaySession]):
    """A kernel on a Jupyter Kernel/Enterprise Gateway with a blocking API.

    ``with GatewaySession(url, token, "python3") as k: r = k.execute(code)``.
    Same arguments and members as :class:`AsyncGatewaySession`.
    """

    _async_class = AsyncGatewaySession
    inject = blocking(AsyncGatewaySession.inject)
    send_comm = blocking(AsyncGatewaySession.send_comm)
