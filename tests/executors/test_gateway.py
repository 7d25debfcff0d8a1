"""AsyncGatewaySession against a real Jupyter Kernel Gateway and Enterprise Gateway on 127.0.0.1."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from executor_contract import KernelContract
from gateway_server import EnterpriseGateway, KernelGateway, eg_python, free_port

from kernel_agent.errors import ConfigError, GatewayError
from kernel_agent.executors import AsyncExecutor, gateway_client, gateway_wire
from kernel_agent.executors.factory import make_gateway_executor
from kernel_agent.executors.gateway import AsyncGatewaySession, GatewaySession
from kernel_agent.executors.gateway_wire import V1_PROTOCOL
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(90)

TOKEN = secrets.token_hex(16)
#: the gateway checks its kernels every time_to_dead seconds (stock: 3 s)
TIME_TO_DEAD = 1.0


def _start(kind: str, workdir: Path) -> Any:
    if kind == "enterprise-gateway":
        return EnterpriseGateway(workdir, TOKEN, time_to_dead=TIME_TO_DEAD).start()
    return KernelGateway(
        workdir, TOKEN, (f"--KernelRestarter.time_to_dead={TIME_TO_DEAD}",)
    ).start()


@pytest.fixture(scope="session", params=["kernel-gateway", "enterprise-gateway"])
def gateway_kind(request: pytest.FixtureRequest) -> str:
    """Every test here runs against both gateways (EG from its own venv: ``make eg-venv``)."""
    if request.param == "enterprise-gateway":
        eg_python()  # a skip saying why when EG was never installed
    return str(request.param)


@pytest.fixture(scope="session")
def gateway(
    gateway_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KernelGateway | EnterpriseGateway]:
    gw = _start(gateway_kind, tmp_path_factory.mktemp(gateway_kind))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def shared(gateway: Any) -> Iterator[Any]:
    with GatewaySession(gateway.url, gateway.token, "python3") as session:
        yield session


@pytest.fixture
def fresh(gateway: Any) -> Iterator[Any]:
    """Factory of new started sessions on the shared gateway, shut down afterwards."""
    made: list[Any] = []

    def make(**kw: Any) -> Any:
        session = GatewaySession(gateway.url, gateway.token, "python3", **kw)
        session.start()
        made.append(session)
        return session

    yield make
    for session in made:
        session.shutdown()


def _text(result: Any) -> str:
    return "".join(o.text for o in result.outputs if o.output_type == "stream")


def _value(result: Any) -> str:
    assert result.ok, result.error
    return str(result.outputs[-1].data["text/plain"])


class TestGatewayContract(KernelContract):
    death_bound = TIME_TO_DEAD + 2.0

    @pytest.fixture
    def executor(self, shared: Any) -> Any:
        return shared

    @pytest.fixture
    def fresh_executor(self, fresh: Any) -> Any:
        return fresh


# ---------------------------------------------------------------- async core
def test_async_session_is_an_executor_and_never_blocks_the_loop(gateway: Any) -> None:
    async def main() -> tuple[Any, int, list[str]]:
        ticks = 0
        seen: list[str] = []

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        async with AsyncGatewaySession(gateway.url, gateway.token, "python3") as session:
            assert isinstance(session, AsyncExecutor)
            task = asyncio.create_task(ticker())
            code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.4)"
            result = await session.execute(code, on_output=lambda o: seen.append(o.text))
            task.cancel()
        return result, ticks, seen

    result, ticks, seen = asyncio.run(main())
    assert result.ok
    assert seen == ["0\n", "1\n", "2\n"]
    assert ticks >= 30  # ~60 expected in 1.2 s; a blocked loop would give ~0


# ---------------------------------------------------------------- protocol details
def test_binary_v1_framing_is_negotiated(shared: Any) -> None:
    assert shared.aio._channels.protocol == V1_PROTOCOL


def test_legacy_json_framing_works_too(gateway: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_client, "OFFERED_SUBPROTOCOLS", [])
    with GatewaySession(gateway.url, gateway.token) as session:
        assert session.aio._channels.protocol is None
        assert _value(session.execute("legacy = 6 * 7\nlegacy")) == "42"
        assert _text(session.execute("print('x' * 100_000)")) == "x" * 100_000 + "\n"


def test_default_kernelspec_comes_from_the_gateway(gateway: Any) -> None:
    with GatewaySession(gateway.url, gateway.token) as session:
        assert session.kernelspec["name"] == "python3"
        assert session.kernel_name == "python3"


# ---------------------------------------------------------------- connection loss
def test_websocket_dropped_mid_cell_is_reopened_with_state_and_output(fresh: Any) -> None:
    session = fresh()
    session.execute("kept = 7")
    sock = session.aio._channels.sock
    threading.Timer(0.4, sock.shutdown, args=(socket.SHUT_RDWR,)).start()
    code = "import time\nprint('a', flush=True)\ntime.sleep(1.0)\nprint('b')\nkept"
    result = session.execute(code, timeout=20)
    assert result.status == "ok"
    assert not result.restarted
    assert _text(result) == "a\nb\n"
    assert _value(result) == "7"
    assert session.aio._channels.sock is not sock


def test_websocket_dropped_between_cells_is_reopened(fresh: Any) -> None:
    session = fresh()
    session.execute("kept = 'still here'")
    session.aio._channels.sock.shutdown(socket.SHUT_RDWR)
    time.sleep(0.2)
    assert _value(session.execute("kept")) == "'still here'"


def test_kernel_killed_while_idle_is_noticed_by_the_next_cell(fresh: Any) -> None:
    session = fresh()
    pid = int(_value(session.execute("import os\nold = 1\nos.getpid()")))
    os.kill(pid, signal.SIGKILL)
    inbox = session.aio._channels.inbox
    deadline = time.monotonic() + 15
    while not len(inbox) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the gateway's "restarting" status has reached us
    assert len(inbox), "the gateway never reported the restart"
    result = session.execute("'old' in dir()")
    assert result.restarted
    assert _value(result) == "False"


# ---------------------------------------------------------------- restarts and lost messages
def test_cells_right_after_restarts_get_their_output(fresh: Any) -> None:
    # After a restart the gateway's iopub link rejoins the kernel a moment after its
    # shell link; a cell sent in between used to lose its output and idle, and wait forever.
    session = fresh()
    for i in range(4):
        session.restart()
        result = session.execute(f"print({i})\n{i}", timeout=20)
        assert _text(result) == f"{i}\n" and _value(result) == str(i)
    for i in range(2):
        assert session.execute("import os\nos._exit(1)").status == "died"
        result = session.execute(f"print({i})", timeout=20)
        assert result.ok and _text(result) == f"{i}\n"


def _lose(monkeypatch: pytest.MonkeyPatch, lost: Any) -> None:
    """Drop incoming messages for which ``lost(msg)`` is true, as a lossy gateway would."""
    route = gateway_client.Channels._route

    def lossy(self: Any, frame: bytes, text: bool) -> None:
        if not lost(gateway_wire.decode(frame, self.protocol, text=text)):
            route(self, frame, text)

    monkeypatch.setattr(gateway_client.Channels, "_route", lossy)


def test_a_cell_whose_end_never_comes_is_reported_not_awaited(
    fresh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = fresh()
    session.execute("kept = 3")
    losing = True

    def cell_output(msg: dict[str, Any]) -> bool:
        parent_type = msg["parent_header"].get("msg_type")
        return losing and msg["channel"] == "iopub" and parent_type == "execute_request"

    _lose(monkeypatch, cell_output)
    started = time.monotonic()
    result = session.execute("kept + 1")  # no timeout: it must end all the same
    elapsed = time.monotonic() - started
    losing = False
    assert result.status == "error" and result.error.ename == "ConnectionLost"
    assert elapsed < 5, f"a lost cell took {elapsed:.1f} s to report"
    assert _value(session.execute("kept")) == "3"


def test_a_cell_the_kernel_never_got_is_reported_not_awaited(
    fresh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = fresh()
    send = gateway_client.Channels.send
    dropped: list[str] = []

    def lossy_send(self: Any, channel: str, msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "execute_request" and not dropped:
            dropped.append(msg["msg_id"])
            return
        send(self, channel, msg)

    monkeypatch.setattr(gateway_client.Channels, "send", lossy_send)
    started = time.monotonic()
    result = session.execute("1 + 1")
    assert dropped and result.status == "error" and result.error.ename == "ConnectionLost"
    assert time.monotonic() - started < 5
    assert _value(session.execute("2 + 2")) == "4"


def test_a_silent_websocket_is_reopened_and_the_cell_finishes(fresh: Any) -> None:
    session = fresh()
    channels = session.aio._channels
    sock = channels.sock

    def go_silent() -> None:  # as if nothing had come in for ages
        channels.last_heard -= 3600

    threading.Timer(0.3, go_silent).start()
    result = session.execute("import time\ntime.sleep(2)\nprint('done')", timeout=20)
    assert result.ok and _text(result) == "done\n"
    assert channels.sock is not sock


def test_websocket_ping_is_answered(shared: Any) -> None:
    channels = shared.aio._channels
    channels.last_heard = 0.0
    channels.ping()
    deadline = time.monotonic() + 5
    while channels.last_heard == 0.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert channels.last_heard > 0.0


# ---------------------------------------------------------------- attach and keep
def test_attach_by_kernel_id_across_two_sessions(gateway: Any) -> None:
    first = GatewaySession(gateway.url, gateway.token, "python3", keep_kernel=True)
    first.start()
    first.execute("persistent = 'from run one'")
    kernel_id = first.kernel_id
    first.shutdown()
    assert kernel_id is not None

    second = GatewaySession(gateway.url, gateway.token, kernel_id=kernel_id, keep_kernel=False)
    with second:
        assert second.kernelspec["name"] == "python3"
        assert _value(second.execute("persistent")) == "'from run one'"
    third = GatewaySession(gateway.url, gateway.token, kernel_id=kernel_id)
    with pytest.raises(GatewayError, match=f"has no kernel {kernel_id}"):
        third.start()


def test_attached_kernel_is_kept_by_default(gateway: Any, fresh: Any) -> None:
    owner = fresh()
    with GatewaySession(gateway.url, gateway.token, kernel_id=owner.kernel_id) as guest:
        guest.execute("shared_value = 5")
    assert _value(owner.execute("shared_value")) == "5"


def test_shutdown_deletes_the_kernel_unless_kept(gateway: Any) -> None:
    session = GatewaySession(gateway.url, gateway.token, "python3")
    session.start()
    kernel_id = session.kernel_id
    probe = GatewaySession(gateway.url, gateway.token, kernel_id=kernel_id)
    assert probe.is_alive()
    session.shutdown()
    session.shutdown()  # twice is fine
    assert not probe.is_alive()


# ---------------------------------------------------------------- one-line errors
def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text and len(text) < 300, text
    return text


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_wrong_or_missing_token(gateway: Any, token: str | None) -> None:
    with pytest.raises(GatewayError) as info:
        GatewaySession(gateway.url, token).start()
    message = _one_line(info.value)
    assert "refused" in message and "token" in message and "HTTP 401" in message


def test_unreachable_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(GatewayError) as info:
        GatewaySession(url, TOKEN).start()
    assert time.monotonic() - started < 5
    assert _one_line(info.value).startswith(f"cannot reach the gateway at {url}")


def test_url_that_is_not_a_gateway(tmp_path: Path) -> None:
    handler = http.server.SimpleHTTPRequestHandler
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(GatewayError) as info:
            GatewaySession(url, TOKEN).start()
        assert "is not a Jupyter Kernel Gateway" in _one_line(info.value)
    finally:
        server.shutdown()
        server.server_close()


def test_malformed_url() -> None:
    with pytest.raises(GatewayError, match="must look like http://host:port"):
        GatewaySession("localhost:8888", TOKEN)


def test_a_user_the_gateway_refuses_gets_its_reason(gateway_kind: str, gateway: Any) -> None:
    """EG checks KERNEL_USERNAME against its unauthorized_users (here "nobody"; stock: root)."""
    session = GatewaySession(gateway.url, gateway.token, env={"KERNEL_USERNAME": "nobody"})
    if gateway_kind == "kernel-gateway":  # KG has no notion of users
        with session:
            assert _value(session.execute("import os\nos.environ['KERNEL_USERNAME']")) == (
                "'nobody'"
            )
        return
    with pytest.raises(GatewayError) as info:
        session.start()
    message = _one_line(info.value)
    assert "User 'nobody' is not authorized to start kernel" in message, message
    assert "HTTP 403" in message and "token" not in message


def test_start_env_reaches_the_kernel_as_each_gateway_passes_it(
    gateway_kind: str, gateway: Any
) -> None:
    """Both pass on KERNEL_* and drop other names; only KG adds PATH, only EG adds its own."""
    env = {"KERNEL_PROBE": "sent", "NOT_A_KERNEL_VAR": "dropped"}
    with GatewaySession(gateway.url, gateway.token, "python3", env=env) as session:
        seen = json.loads(
            _text(session.execute("import os, json\nprint(json.dumps(dict(os.environ)))"))
        )
        kernel_id = session.kernel_id
    assert seen["KERNEL_PROBE"] == "sent" and "NOT_A_KERNEL_VAR" not in seen
    if gateway_kind == "kernel-gateway":
        assert "PATH" in seen and "KERNEL_ID" not in seen
    else:
        assert "PATH" not in seen  # EG keeps only its inherited_envs, and none by default
        assert seen["KERNEL_ID"] == kernel_id and seen["KERNEL_USERNAME"]
        assert seen["KERNEL_LANGUAGE"] == "python"


def test_unknown_kernelspec(gateway: Any) -> None:
    with pytest.raises(GatewayError) as info:
        GatewaySession(gateway.url, gateway.token, "no-such-kernel").start()
    message = _one_line(info.value)
    assert "no kernelspec 'no-such-kernel'" in message and "python3" in message


def test_gateway_killed_mid_run(gateway_kind: str, tmp_path: Path) -> None:
    kg = _start(gateway_kind, tmp_path)
    session = GatewaySession(kg.url, TOKEN, "python3", reconnect_timeout=1.0)
    try:
        session.start()
        assert session.execute("1").ok
        threading.Timer(0.5, kg.stop, kwargs={"sig": signal.SIGKILL}).start()
        started = time.monotonic()
        with pytest.raises(GatewayError) as info:
            session.execute("import time\ntime.sleep(30)")
        assert time.monotonic() - started < 10
        assert _one_line(info.value).startswith(f"lost the connection to the gateway at {kg.url}")
    finally:
        kg.stop(signal.SIGKILL)
        session.shutdown()  # must not raise with the gateway gone


# ---------------------------------------------------------------- factory
def test_make_gateway_executor_reads_settings(gateway: Any) -> None:
    settings = Settings.from_env(
        {"KERNEL_AGENT_GATEWAY_URL": gateway.url, "KERNEL_AGENT_GATEWAY_TOKEN": gateway.token},
        startup_timeout=30.0,
    )
    session = make_gateway_executor(settings)
    assert session.url == gateway.url and session.kernel_name == "python3"
    assert session.startup_timeout == 30.0

    async def two_and_two() -> Any:
        async with session:
            return await session.execute("2 + 2")

    assert _value(asyncio.run(two_and_two())) == "4"


def test_make_gateway_executor_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="KERNEL_AGENT_GATEWAY_URL"):
        make_gateway_executor(Settings.from_env({}))


_FORGER = (
    "from ipykernel.kernelbase import Kernel\n"
    "k = Kernel.instance(); sess = k.session; parent = k.get_parent('shell')\n"
)


@pytest.mark.parametrize(
    "attack",
    [
        "sess.send(k.iopub_socket, 'status', content={}, parent=parent)",
        "sess.send(k.iopub_socket, 'comm_msg', content=b'[1, 2]', parent=parent)",
        "sess.send(k.iopub_socket, 'stream', content={'name': 3, 'text': [1]}, parent=parent)",
    ],
)
def test_a_malformed_kernel_message_is_dropped_not_raised(fresh: Any, attack: str) -> None:
    """The review's E3 through a gateway: the cell ends, the next one runs."""
    session = fresh()
    result = session.execute(_FORGER + attack + "\nprint('sent')", timeout=30)
    assert result.status == "ok", result.error
    assert "sent" in _text(result)
    assert "1 malformed kernel messages were dropped" in _text(result)
    assert _value(session.execute("6 * 7", timeout=30)) == "42"


def test_gateway_env_is_the_environment_s_kernel_vars_without_ours() -> None:
    env = {
        "KERNEL_USERNAME": "alice",
        "KERNEL_NAMESPACE": "team-a",
        "KERNEL_AGENT_GATEWAY_TOKEN": "secret",
        "KERNEL_AGENT_API_KEY": "secret",
        "KERNEL_ID": "5e4d1f6a-0000-4000-8000-000000000000",  # EG: every kernel that id
        "OPENAI_API_KEY": "secret",
        "HOME": "/home/alice",
    }
    settings = Settings.from_env(env)
    assert settings.gateway_env == {"KERNEL_USERNAME": "alice", "KERNEL_NAMESPACE": "team-a"}
    assert Settings.from_env({}).gateway_env == {}
    assert make_gateway_executor(settings.with_(gateway_url="http://h:1")).env == (
        settings.gateway_env
    )
