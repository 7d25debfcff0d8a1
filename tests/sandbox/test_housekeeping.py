"""What agents leave behind, and the bounds that need a cgroup: uid locks, rooms, cgroups,
swap and the default CPU share."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernel_agent.sandbox import bwrap_problem, make_launcher
from kernel_agent.sandbox.cgroups import (
    cgroup_support,
    create_cgroup,
    default_cpu_cores,
    prune_cgroups,
)
from kernel_agent.sandbox.limits import ResourceLimits
from kernel_agent.sandbox.room import (
    agent_stamp,
    keep_room,
    make_room,
    prune_rooms,
    remove_tree,
)
from kernel_agent.sandbox.uids import _lock_dir, lease_uid, prune_leases
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(60)

MEMORY = ResourceLimits(memory_mb=64)
HAS_CGROUP = cgroup_support(MEMORY) is not None
needs_cgroup = pytest.mark.skipif(not HAS_CGROUP, reason="no cgroup can be made on this host")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _dead_stamp() -> str:
    """The stamp of an agent that has exited (read while it lived)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        return agent_stamp(child.pid)
    finally:
        child.kill()
        child.wait()


# ---------------------------------------------------------------- uid lock files
def test_a_released_lease_leaves_no_lock_file() -> None:
    lease = lease_uid()
    path = _lock_dir() / str(lease.uid)
    assert path.exists()
    lease.release()
    assert not path.exists()


def test_prune_removes_only_lock_files_no_one_holds() -> None:
    folder = _lock_dir()
    held = lease_uid()
    stale = folder / "1999999999"  # out of the leased range: no kernel of ours can hold it
    stale.write_text("")
    try:
        assert prune_leases(folder) >= 1
        assert not stale.exists()
        assert (folder / str(held.uid)).exists()
    finally:
        held.release()
        stale.unlink(missing_ok=True)


# ---------------------------------------------------------------- rooms of dead agents
def test_rooms_of_dead_agents_go_and_the_others_stay(tmp_path: Path) -> None:
    base = str(tmp_path)
    mine = make_room(os.geteuid(), os.getegid(), None)
    dead = tmp_path / "ka-deadagent"
    unknown = tmp_path / "ka-nostamp"  # made by an older version: not provably dead
    stranger = tmp_path / "ka-stranger"  # a dead stamp, but not ours by mode
    for folder in (dead, unknown, stranger):
        folder.mkdir(mode=0o700)
        (folder / "w").mkdir()
    (dead / "agent").write_text(_dead_stamp())
    (stranger / "agent").write_text(_dead_stamp())
    stranger.chmod(0o755)
    (tmp_path / "ka-alive").mkdir(mode=0o700)
    (tmp_path / "ka-alive" / "agent").write_text(agent_stamp())
    try:
        assert prune_rooms(base) == [dead]
        assert not dead.exists() and unknown.exists() and stranger.exists()
        assert (tmp_path / "ka-alive").exists()
        assert mine.root.exists() and (mine.root / "agent").read_text() == agent_stamp()
        assert str(mine.root) not in map(str, prune_rooms())
    finally:
        mine.remove()


def test_a_servers_room_stays_while_its_index_says_the_session_is_live(tmp_path: Path) -> None:
    """Row 31: a dead server's room is pruned only once its state says the session ended
    (or its state is gone), whoever runs the housekeeping."""
    index = tmp_path / "state" / "index.json"
    index.parent.mkdir()
    rooms = {}
    for name in ("live", "ended", "other", "gone", "garbled"):
        root = tmp_path / f"ka-{name}"
        (root / "w").mkdir(parents=True)
        root.chmod(0o700)
        (root / "agent").write_text(_dead_stamp())
        rooms[name] = root
    keep_room(rooms["live"] / "w", index)
    keep_room(rooms["ended"] / "w", index)
    keep_room(rooms["other"] / "w", index)  # listed under another work dir: not its session
    keep_room(rooms["gone"] / "w", tmp_path / "removed-state" / "index.json")
    keep_room(rooms["garbled"] / "w", tmp_path / "garbled.json")
    (tmp_path / "garbled.json").write_text("{not json")
    sessions = [
        {"id": "a", "status": "live", "work_dir": str(rooms["live"] / "w")},
        {"id": "b", "status": "ended", "work_dir": str(rooms["ended"] / "w")},
        {"id": "c", "status": "live", "work_dir": str(tmp_path / "ka-elsewhere" / "w")},
    ]
    index.write_text(json.dumps({"sessions": sessions}))
    removed = set(prune_rooms(str(tmp_path)))
    assert removed == {rooms[n] for n in ("ended", "other", "gone", "garbled")}
    assert rooms["live"].exists()
    # once the server's restart marks it ended, anyone may prune it
    index.write_text(json.dumps({"sessions": [{**sessions[0], "status": "ended"}]}))
    assert prune_rooms(str(tmp_path)) == [rooms["live"]]
    with pytest.raises(ValueError):
        keep_room(tmp_path / "not-a-room", index)


def _run_cli(fake_llm, view: Path, tmpdir: dict[str, str]) -> None:  # noqa: ANN001
    from crossing import SRC
    from fake_openai import run_cell, text

    fake_llm.enqueue(run_cell("print('other agent')"), text("done"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    env.update(PYTHONPATH=str(SRC), **tmpdir)
    done = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "run", "--base-url", fake_llm.base_url,
         "--model", "m", "--api-key", "k", "--cwd", str(view),
         "--notebook", str(view.parent / "other.ipynb"), "go"],
        capture_output=True, text=True, env=env, timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("other", ["serve", "run"])
def test_a_crashed_servers_files_survive_other_agents_until_it_restarts(
    tmp_path: Path,
    fake_llm,
    other: str,  # noqa: ANN001
) -> None:
    """Row 31, end to end: ``serve`` is SIGKILLed, another kernel-agent process (a second
    ``serve``, a CLI run) starts a kernel (and its housekeeping), then ``serve`` restarts:
    the session's upload and the kernel's file are listed and downloadable."""
    import httpx2 as httpx
    from serve_server import TOKEN, serve

    auth = {"Authorization": f"Bearer {TOKEN}"}
    state = tmp_path / "state"
    # rooms in a temp dir of the test's own: other agents on a shared host prune /tmp
    # (and an older kernel-agent would not know a server's rooms)
    base = Path(tempfile.mkdtemp(prefix="kt", dir="/tmp"))
    private = {"TMPDIR": str(base)}
    try:
        with (
            serve(state, env=private) as srv,
            httpx.Client(base_url=srv.url, headers=auth, timeout=120) as http,
        ):
            r = http.post("/v1/sessions", json={})
            assert r.status_code == 201, r.text
            sid = r.json()["id"]
            assert http.put(
                f"/v1/sessions/{sid}/files/upload.csv", content=b"customer upload"
            ).is_success
            code = "import os\nopen('result.txt', 'w').write('an hour of work')\nprint(os.getcwd())"
            reply = http.post(f"/v1/sessions/{sid}/execute", json={"code": code}).json()
            work = Path("".join(o.get("text", "") for o in reply["outputs"]).strip())
            srv.proc.kill()  # SIGKILL: nothing is finalised
            srv.proc.wait(30)
        assert (work.parent / "keeper").is_file()
        # a dead agent's room beside it, that the other process's housekeeping must remove
        assert work.parent.parent == base
        witness = Path(tempfile.mkdtemp(prefix="ka-", dir=base))
        (witness / "agent").write_text(_dead_stamp())
        view = tmp_path / "other-view"
        view.mkdir()
        if other == "serve":
            with (
                serve(tmp_path / "other-state", env=private) as srv2,
                httpx.Client(base_url=srv2.url, headers=auth, timeout=120) as http,
            ):
                r = http.post("/v1/sessions", json={})
                assert r.status_code == 201, r.text
        else:
            _run_cli(fake_llm, view, private)
        deadline = time.monotonic() + 10
        while witness.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not witness.exists(), (
            "the other process ran no housekeeping: the test proves nothing"
        )
        assert work.parent.is_dir()
        with (
            serve(state, env=private) as srv,
            httpx.Client(base_url=srv.url, headers=auth, timeout=60) as http,
        ):
            info = http.get(f"/v1/sessions/{sid}").json()
            assert info["status"] == "ended", info
            listed = {f["path"] for f in http.get(f"/v1/sessions/{sid}/files").json()["files"]}
            assert {"upload.csv", "result.txt"} <= listed
            assert http.get(f"/v1/sessions/{sid}/files/result.txt").content == b"an hour of work"
            assert http.get(f"/v1/sessions/{sid}/files/upload.csv").content == b"customer upload"
        assert not work.parent.exists()  # collected by its own server, once delivered
    finally:
        for left in base.iterdir():
            remove_tree(left)  # unmounts a work dir's own filesystem first
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- cgroups
@needs_cgroup
def test_empty_cgroups_of_dead_agents_go() -> None:
    group = create_cgroup(MEMORY)
    assert group is not None
    (own,) = group.dirs[:1]
    left = own.with_name(f"kernel-agent-{_dead_pid()}-0000dead")
    left.mkdir()
    try:
        assert left in prune_cgroups()
        assert not left.exists()
        assert own.exists()  # ours: this process is alive
    finally:
        group.remove()
        if left.exists():
            left.rmdir()


@needs_cgroup
def test_swap_is_bounded_with_the_memory() -> None:
    group = create_cgroup(MEMORY)
    assert group is not None
    try:
        if not group.swap:
            pytest.skip("this host does not account for swap in its memory cgroup")
        (memory,) = [d for d in group.dirs if "memory" in str(d)] or group.dirs[:1]
        if group.version == "v1":
            assert (memory / "memory.memsw.limit_in_bytes").read_text().strip() == str(64 << 20)
        else:
            assert (memory / "memory.swap.max").read_text().strip() == "0"
        assert "swap" in group.describe()
    finally:
        group.remove()


def test_the_default_cpu_share_leaves_a_core_to_the_host(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    share = default_cpu_cores(MEMORY)
    if cgroup_support(MEMORY, float(max(1, cores - 1))) is None:
        assert share is None
        pytest.skip("no cgroup with the cpu controller here: the CPU share stays unset")
    assert share == max(1, cores - 1)
    if bwrap_problem()[0] is not None:
        return
    bounds = make_launcher(Settings(cwd=tmp_path, home=tmp_path / "h"), tmp_path).status.bounds
    assert "cpu" in bounds, bounds
    off = Settings(cwd=tmp_path, home=tmp_path / "h", cpu_cores=0)  # 0: no CPU bound
    assert "cpu" not in make_launcher(off, tmp_path).status.bounds
