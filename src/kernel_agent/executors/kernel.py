"""A persistent local Jupyter kernel: :class:`AsyncKernelSession` and its blocking twin.

One implementation, async; :class:`KernelSession` is generated from it. The hot
path waits on shell and iopub together (no sleep-polling), finishes when both the
``idle`` status and the ``execute_reply`` for *our* request have arrived, and checks
that the kernel process is alive about once a second, so a kernel killed mid-cell is
reported in about a second instead of at the timeout.

The client's sockets are plain (blocking) zmq sockets read with ``NOBLOCK``; the
event loop watches their file descriptors itself. A ``zmq.asyncio`` poll costs about
75 us of CPU per wake-up, and a cell needs three wake-ups: 10% of a 2.5 ms round trip.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.kernelspec import NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from jupyter_client.session import Session

from ..errors import ConfigError, KernelDied, KernelNotFound, KernelStartError
from ..notebook.outputs import LOST_END_NOTE, OutputCollector
from ..sandbox.env import kernel_environment
from ..syncify import blocking
from .base import Isolation, SyncExecutor
from .cell import KernelProtocolExecutor, Outcome, take_reply
from .late_output import LateOutput
from .messages import checked

if TYPE_CHECKING:
    from ..sandbox import KernelLauncher

__all__ = ["AsyncKernelSession", "KernelSession"]

_ALIVE_CHECK_S = 1.0
#: how long one of a cell's idle and reply may come without the other before we ask
_FOLLOW_UP_S = 1.0
#: messages dropped per loop turn while draining between cells
_DRAIN_BATCH = 256
#: messages queued in this process per socket (zmq's default is 1000)
_RCVHWM = 8


class AsyncKernelSession(KernelProtocolExecutor):
    """A kernel that keeps its state across ``execute`` calls.

    ``kernel_name`` is any installed kernelspec. The kernel's environment is
    ``env`` (default: ours) without secret-looking variables, except those named in
    ``env_passthrough``. ``interrupt_grace`` is how long an interrupted cell may take
    to stop before the kernel is restarted.
    """

    def __init__(
        self,
        kernel_name: str = "python3",
        cwd: str | Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        env_passthrough: tuple[str, ...] | list[str] = (),
        startup_timeout: float = 60.0,
        max_output_chars: int = 1_000_000,
        interrupt_grace: float = 3.0,
        restart_on_death: bool = True,
        launcher: KernelLauncher | None = None,
    ) -> None:
        if not kernel_name:
            raise ConfigError("kernel name is empty")
        self.cwd = Path(cwd).resolve() if cwd is not None else Path.cwd()
        if not self.cwd.is_dir():
            raise ConfigError(f"working directory does not exist: {self.cwd}")
        super().__init__(
            startup_timeout=startup_timeout,
            max_output_chars=max_output_chars,
            interrupt_grace=interrupt_grace,
            restart_on_death=restart_on_death,
        )
        self.kernel_name = kernel_name
        self.env = kernel_environment(env, env_passthrough)
        self.launcher = launcher
        self._km: AsyncKernelManager | None = None
        self._kc: BlockingKernelClient | None = None
        # between cells, the loop that drops what the kernel sends, and the fds it watches
        self._draining: tuple[asyncio.AbstractEventLoop, list[int]] | None = None

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start the kernel and wait until it answers ``kernel_info``."""
        if self._km is not None:
            return
        km = AsyncKernelManager(kernel_name=self.kernel_name)
        try:
            spec = km.kernel_spec
        except NoSuchKernel:
            raise KernelNotFound(
                f"no Jupyter kernel named {self.kernel_name!r} is installed"
            ) from None
        if spec is None:
            raise KernelNotFound(f"no Jupyter kernel named {self.kernel_name!r} is installed")
        launch_kw: dict[str, Any] = {"cwd": str(self.cwd), "env": dict(self.env)}
        if self.launcher is not None:
            launch_kw = self.launcher.prepare(km, launch_kw)
        self._km = km
        try:
            await km.start_kernel(**launch_kw)
        except Exception as exc:
            self._km = None
            said = self._kernel_said(km)
            self._cleanup_launcher(km)
            raise KernelStartError(
                f"kernel {self.kernel_name!r} failed to start: {exc}{said}"
            ) from exc
        self.kernelspec = {
            "name": self.kernel_name,
            "display_name": spec.display_name,
            "language": spec.language,
        }
        await self._connect()

    async def _connect(self) -> None:
        """Connect a client and wait until the kernel answers on shell and iopub."""
        km = self._manager()
        kc = BlockingKernelClient(**km.get_connection_info(session=True), context=_client_context())
        kc.start_channels(stdin=False, hb=False, control=False)
        self._kc = kc
        try:
            reply = await self._handshake()
            if self.launcher is not None:
                self.launcher.seal(km)  # the kernel can no longer touch its ipc paths
        except KernelStartError as exc:
            self._drain_between_cells(False)
            kc.stop_channels()
            self._kc = None
            await km.shutdown_kernel(now=True)
            self._km = None
            said = self._kernel_said(km)
            self._cleanup_launcher(km)
            if said:
                raise KernelStartError(f"{exc}{said}") from None
            raise
        await self._ready(reply["content"])
        self._between_cells()

    @property
    def _connected(self) -> bool:
        return self._kc is not None

    async def _send_request(self, msg_type: str, content: dict[str, Any]) -> str:
        kc = self._kc
        assert kc is not None
        msg = kc.session.msg(msg_type, content)
        kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def _between_cells(self) -> None:
        self._drain_between_cells(True)

    async def send_comm(self, comm_id: str, data: dict[str, Any], subshell_id: str | None) -> None:
        kc = self._kc
        if kc is None:
            return
        msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if subshell_id:
            msg["header"]["subshell_id"] = subshell_id
        kc.shell_channel.send(msg)

    async def _handshake(self) -> dict[str, Any]:
        """Send ``kernel_info`` until its reply and its ``idle`` on iopub both arrive.

        Our own status message on iopub proves the subscription is live, so no output
        of the first cell is lost. Returns the kernel_info reply.
        """
        km, kc = self._manager(), self._kc
        assert kc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if not await km.is_alive():
                raise KernelStartError(f"kernel {self.kernel_name!r} exited while starting")
            attempt = min(deadline, time.monotonic() + 1.0)
            outcome, reply = await self._collect_reply(kc.kernel_info(), OutputCollector(), attempt)
            if outcome == "ok" and reply is not None:
                return reply
        raise KernelStartError(
            f"kernel {self.kernel_name!r} did not answer within {self.startup_timeout:g} s"
        )

    async def shutdown(self) -> None:
        """Stop the kernel. Safe to call twice."""
        self._drain_between_cells(False)
        km, kc = self._km, self._kc
        self._km = self._kc = None
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            try:
                await km.shutdown_kernel(now=not await km.is_alive())
            except Exception:  # a kernel that is already gone is fine
                await km.shutdown_kernel(now=True)
            self._cleanup_launcher(km)

    def _kernel_said(self, km: AsyncKernelManager) -> str:
        """``"; it said: ..."`` from the kernel's log, for a start that failed."""
        room = self.launcher.room(km) if self.launcher is not None else None
        tail = room.log_tail() if room is not None else ""
        return f"; it said: {tail}" if tail else ""

    @property
    def kernel_cwd(self) -> Path:
        """Where the kernel runs: its private work dir when sandboxed, else :attr:`cwd`."""
        if self.launcher is not None and self._km is not None:
            return Path(self.launcher.kernel_cwd(self._km, self.cwd))
        return self.cwd

    @property
    def isolation(self) -> Isolation:
        """The launcher's sandbox status; a kernel started without one is not sandboxed."""
        if self.launcher is None:
            return Isolation("none", "started without a launcher", "none (no launcher)")
        return Isolation.from_status(self.launcher.status)

    def _cleanup_launcher(self, km: AsyncKernelManager) -> None:
        if self.launcher is not None:
            self.launcher.cleanup(km)

    async def is_alive(self) -> bool:
        return self._km is not None and await self._km.is_alive()

    def make_launcher(self) -> KernelLauncher | None:
        """The launcher for another kernel of the same kind (a verification re-run).

        Launchers keep their state per kernel manager, so this session's serves.
        """
        return self.launcher

    async def interrupt(self) -> None:
        """Send the kernel an interrupt (SIGINT for local kernels)."""
        await self._manager().interrupt_kernel()

    async def restart(self) -> None:
        """Restart the kernel (state is lost) and reconnect."""
        km = self._manager()
        self._drain_between_cells(False)
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        await km.restart_kernel(now=True)
        self.display_map.clear()
        await self._connect()

    def _manager(self) -> AsyncKernelManager:
        if self._km is None:
            raise KernelDied("the kernel is not running (session not started or shut down)")
        return self._km

    # ----------------------------------------------------------------- messages
    def _drain_between_cells(self, on: bool) -> None:
        """Drop what the kernel sends while no cell runs (``on``), or stop doing so.

        Nothing that arrives between cells is wanted (a cell's messages carry its id),
        but left queued it holds the host's memory: a kernel thread that publishes
        50 MB messages while the agent waits for the model would fill zmq's queue of
        1000 messages. Needs a running loop (the agent's, or the blocking twin's
        while a call runs).
        """
        if self._draining is not None:
            loop, fds = self._draining
            self._draining = None
            if not loop.is_closed():
                for fd in fds:
                    loop.remove_reader(fd)
        kc = self._kc
        if not on or kc is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        sockets = (kc.iopub_channel.socket, kc.shell_channel.socket)
        fds = [_fd(sock) for sock in sockets]
        for fd in fds:
            loop.add_reader(fd, _discard, sockets)
        self._draining = (loop, fds)
        _discard(sockets)

    async def _collect(
        self, msg_id: str, collector: OutputCollector, deadline: float | None
    ) -> Outcome:
        """Feed messages for ``msg_id`` to ``collector`` until idle + reply (see below)."""
        outcome, _ = await self._collect_reply(msg_id, collector, deadline)
        return outcome

    async def _collect_reply(
        self, msg_id: str, collector: OutputCollector, deadline: float | None
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """Feed messages for ``msg_id`` to ``collector`` until idle + reply.

        Everything already queued is read without waiting (one wake-up per burst of
        messages, not one per message). Returns the outcome, "ok", "reply_error",
        "timeout" (deadline passed) or "died", and the shell reply if it came.

        When one of idle and reply has come and the other has not for a second, a
        ``kernel_info`` request follows: the kernel answers it after our reply, and
        publishes its status after our idle, so seeing its answer first means ours
        was lost (a message over the size bound, or one the kernel dropped in a
        flood). The cell then ends with a note instead of at its timeout.
        """
        kc, km = self._kc, self._km
        assert kc is not None and km is not None
        iopub, shell = kc.iopub_channel.socket, kc.shell_channel.socket
        session = kc.session
        idle = lost = False
        reply: dict[str, Any] | None = None
        next_alive_check = time.monotonic() + _ALIVE_CHECK_S
        status = "ok"
        half_done: float | None = None  # when one of idle and reply came
        follow_up: str | None = None
        late = LateOutput(self.late_output_s)
        self._drain_between_cells(False)
        while True:
            for frames in _queued(iopub):
                msg = _decode(session, frames)
                if msg is None:
                    collector.malformed += 1
                    continue
                parent = msg["parent_header"].get("msg_id")
                if parent == msg_id:
                    idle = self._take_iopub(msg, collector, idle)
                    late.heard(time.monotonic())
                elif follow_up is not None and parent == follow_up and not idle:
                    lost = True
            for frames in _queued(shell):
                msg = _decode(session, frames)
                if msg is None:
                    collector.malformed += 1
                    continue
                parent = msg["parent_header"].get("msg_id")
                if parent == msg_id:
                    reply = msg
                    status = take_reply(collector, msg["content"])
                elif follow_up is not None and parent == follow_up and reply is None:
                    lost = True
            now = time.monotonic()
            if idle and reply is not None:
                late.open(now)
                if now >= late.closes_at():
                    return ("ok" if status == "ok" else "reply_error"), reply
                await _readable((iopub,), late.closes_at() - now)
                continue
            if lost:
                collector.notes.append(LOST_END_NOTE)
                ok = status == "ok" and collector.error is None
                return ("ok" if ok else "reply_error"), reply
            if deadline is not None and now >= deadline:
                return "timeout", reply
            if now >= next_alive_check:
                if not await km.is_alive():
                    return "died", reply
                next_alive_check = now + _ALIVE_CHECK_S
            wait = next_alive_check - now
            if (idle or reply is not None) and follow_up is None:
                half_done = half_done or now
                if now - half_done >= _FOLLOW_UP_S:
                    follow_up = kc.kernel_info()
                else:
                    wait = min(wait, half_done + _FOLLOW_UP_S - now)
            if deadline is not None:
                wait = min(wait, deadline - now)
            await _readable((iopub, shell), max(wait, 0))

    async def _exit_reason(self) -> str:
        provisioner = self._km.provisioner if self._km is not None else None
        process = provisioner.process if isinstance(provisioner, LocalProvisioner) else None
        code = process.poll() if process is not None else None
        if code is None:
            return "exit status unknown"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"


def _client_context() -> zmq.Context[zmq.Socket[bytes]]:
    """The shared zmq context, with the bound this client's sockets are made with.

    A shadow: the same I/O thread, its own socket defaults. ``RCVHWM`` bounds how many
    messages wait in this process while it is busy; the kernel's own queue holds the
    rest, in its own bounded memory. (No ``MAXMSGSIZE``: a message over it drops the
    connection, and libzmq did not bring iopub back for the kernel's lifetime.)
    """
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.shadow(zmq.Context.instance().underlying)
    ctx.setsockopt(zmq.RCVHWM, _RCVHWM)
    return ctx


def _decode(session: Session, frames: list[bytes]) -> dict[str, Any] | None:
    """One message from its wire frames; None for one that does not decode or has a bad shape."""
    try:
        return checked(session.deserialize(session.feed_identities(frames)[1]))
    except Exception:  # a bad signature, bad JSON, JSON nested too deep, missing keys
        return None


def _discard(sockets: tuple[zmq.Socket, ...]) -> None:
    """Read and drop what is queued on ``sockets`` (between cells nothing there is wanted).

    At most ``_DRAIN_BATCH`` messages per call, then again at the loop's next turn, so
    a kernel that floods cannot starve the loop (the model's stream runs on it).
    """
    for sock in sockets:
        for _ in range(_DRAIN_BATCH):
            try:
                sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            except zmq.ZMQError:  # closed meanwhile
                return
        else:
            asyncio.get_running_loop().call_soon(_discard, sockets)
            return
        try:
            sock.getsockopt(zmq.EVENTS)  # re-arms the edge-triggered descriptor
        except zmq.ZMQError:
            return


def _events(sock: zmq.Socket) -> int:
    value = sock.getsockopt(zmq.EVENTS)
    assert isinstance(value, int)
    return value


def _fd(sock: zmq.Socket) -> int:
    value = sock.getsockopt(zmq.FD)
    assert isinstance(value, int)
    return value


async def _readable(sockets: tuple[zmq.Socket, ...], timeout: float) -> None:
    """Return when one of ``sockets`` may have a message, or after ``timeout`` seconds.

    A zmq file descriptor is edge-triggered ("something changed"): ``ZMQ_EVENTS`` is
    checked before waiting, and read on wake-up, which also quiets the descriptor.
    """
    if any(_events(sock) & zmq.POLLIN for sock in sockets):
        return
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake() -> None:
        for sock in sockets:
            try:
                sock.getsockopt(zmq.EVENTS)
            except zmq.ZMQError:  # closed under us (the kernel shut down mid-cell): just wake
                pass
        if not woken.done():
            woken.set_result(None)

    fds = [_fd(sock) for sock in sockets]
    for fd in fds:
        loop.add_reader(fd, wake)
    timer = loop.call_later(timeout, wake)
    try:
        await woken
    finally:
        timer.cancel()
        for fd in fds:
            loop.remove_reader(fd)


def _queued(socket: zmq.Socket) -> Iterator[list[bytes]]:
    """The multipart messages already waiting on ``socket``, without blocking."""
    while True:
        try:
            yield socket.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return


class KernelSession(SyncExecutor[AsyncKernelSession]):
    """A persistent Jupyter kernel with a blocking API.

    ``with KernelSession(kernel_name="python3", cwd=workdir) as k: r = k.execute(code)``.
    Same arguments and members as :class:`AsyncKernelSession`.
    """

    _async_class = AsyncKernelSession
    inject = blocking(AsyncKernelSession.inject)
    send_comm = blocking(AsyncKernelSession.send_comm)
