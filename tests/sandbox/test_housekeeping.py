"""What agents leave behind, and the bounds that need a cgroup: uid locks, rooms, cgroups,
swap and the default CPU share."""

from __future__ import annotations

import os
import subprocess
import sys
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
from kernel_agent.sandbox.room import agent_stamp, make_room, prune_rooms
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
