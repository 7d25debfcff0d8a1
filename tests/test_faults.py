"""Faults in kernel code, on a real sandboxed kernel: each is reported, and the next cell runs.

One kernel serves the whole module, as in a real run: a fault that kills it must
leave a restarted kernel behind. Where the host cannot sandbox, the kernel runs
unsandboxed with the same limits, and tests that need the sandbox (or that would
touch the host without it) are skipped, saying so.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from kernel_agent.executors.kernel import KernelSession
from kernel_agent.results import CellResult
from kernel_agent.sandbox import make_launcher
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(90)

LIMITS = {
    "memory_limit_mb": 2048,
    "file_size_limit_mb": 16,
    "max_processes": 128,
    "cpu_time_limit_s": 300,
}
SECRET = "sk-test-do-not-leak-1234"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def launcher(work: Path):  # noqa: ANN201
    return make_launcher(Settings(cwd=work, home=work / ".home", sandbox="auto", **LIMITS), work)


@pytest.fixture(scope="module")
def session(work: Path, launcher) -> Iterator[KernelSession]:  # noqa: ANN001
    env = dict(os.environ, OPENAI_API_KEY=SECRET)
    with KernelSession(cwd=work, env=env, launcher=launcher, interrupt_grace=2.0) as k:
        yield k


@pytest.fixture
def k(session: KernelSession) -> KernelSession:
    """The module's kernel, restarted first if an earlier test left it dead."""
    if not session.is_alive():
        session.restart()
    return session


@pytest.fixture
def sandboxed(launcher) -> None:  # noqa: ANN001
    if not launcher.status.sandboxed:
        pytest.skip(f"needs the sandbox, and this host has none: {launcher.status.reason}")


def next_cell_runs(k: KernelSession) -> None:
    r = k.execute("print(6 * 7)", timeout=30)
    assert r.status == "ok", r.error
    assert r.outputs[0].text == "42\n"


def error_of(r: CellResult) -> str:
    assert r.error is not None, r
    return f"{r.error.ename}: {r.error.evalue}"


# ---------------------------------------------------------------- runaway code
def test_infinite_python_loop_is_interrupted_and_state_kept(k: KernelSession) -> None:
    k.execute("survivor = 'still here'")
    started = time.monotonic()
    r = k.execute("while True:\n    pass", timeout=1)
    assert r.status == "timeout" and not r.restarted
    assert "interrupted" in error_of(r) and time.monotonic() - started < 3
    assert k.execute("print(survivor)").outputs[0].text == "still here\n"
    next_cell_runs(k)


def test_loop_ignoring_sigint_gets_a_restart(k: KernelSession) -> None:
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    r = k.execute(code, timeout=1)
    assert r.status == "timeout" and r.restarted
    assert "restarted" in error_of(r)
    next_cell_runs(k)


def test_os_exit_is_reported_as_death(k: KernelSession) -> None:
    r = k.execute("import os\nos._exit(1)")
    assert r.status == "died" and r.restarted
    assert "exit code 1" in error_of(r)
    next_cell_runs(k)


def test_segfault_is_reported_as_death(k: KernelSession) -> None:
    r = k.execute("import ctypes\nctypes.string_at(0)")
    assert r.status == "died" and r.restarted
    assert error_of(r).startswith("DeadKernelError")
    next_cell_runs(k)


# ---------------------------------------------------------------- resources
def test_memory_bomb_gives_memory_error(k: KernelSession) -> None:
    r = k.execute("hog = []\nwhile True:\n    hog.append(bytearray(64 * 1024 * 1024))", timeout=60)
    assert r.status == "error", r.error
    assert r.error.ename == "MemoryError"
    k.execute("del hog")
    next_cell_runs(k)


def test_one_huge_allocation_gives_memory_error(k: KernelSession) -> None:
    r = k.execute("x = bytearray(8 * 1024 ** 3)")
    assert r.error is not None and r.error.ename == "MemoryError"
    next_cell_runs(k)


def test_huge_file_stops_at_the_size_limit(k: KernelSession, work: Path) -> None:
    r = k.execute(
        "with open('huge.bin', 'wb') as f:\n"
        "    for _ in range(1024):\n"
        "        f.write(b'\\0' * (1 << 20))"
    )
    assert r.status == "error"
    assert "File too large" in error_of(r)
    assert (k.kernel_cwd / "huge.bin").stat().st_size == LIMITS["file_size_limit_mb"] << 20
    (k.kernel_cwd / "huge.bin").unlink()
    next_cell_runs(k)


def test_fork_bomb_is_bounded_and_the_host_stays_fine(k: KernelSession, launcher) -> None:  # noqa: ANN001
    if os.geteuid() == 0 and not launcher.status.sandboxed:
        pytest.skip(
            "unsandboxed as root: RLIMIT_NPROC is not enforced, a fork bomb would hit the host"
        )
    # every process forks until 2 s have passed, then the children exit
    code = (
        "import os, time\n"
        "main, end, refused = os.getpid(), time.time() + 2, 0\n"
        "while time.time() < end:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        refused += 1\n"
        "        time.sleep(0.01)\n"
        "if os.getpid() != main:\n"
        "    os._exit(0)\n"
        "while True:  # reap: zombies would hold on to the process limit\n"
        "    try:\n"
        "        os.wait()\n"
        "    except ChildProcessError:\n"
        "        break\n"
        "print('refused', refused)"
    )
    host_before = len(psutil.pids())
    started = time.monotonic()
    r = k.execute(code, timeout=30)
    assert time.monotonic() - started < 15
    assert r.status == "ok", r.error
    assert int(r.outputs[0].text.split()[1]) > 0  # the limit said no
    # the host: it can still start processes, and the bomb did not stay behind
    assert subprocess.run(["true"], timeout=10).returncode == 0
    deadline = time.monotonic() + 10
    while len(psutil.pids()) > host_before + 20 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(psutil.pids()) <= host_before + 20
    r = k.execute("import subprocess\nprint(subprocess.run(['true']).returncode)")
    assert r.outputs[0].text == "0\n", r.error  # the kernel can fork again
    next_cell_runs(k)


# ---------------------------------------------------------------- output and input
def _rss() -> int:
    return psutil.Process().memory_info().rss


@pytest.mark.parametrize("shape", ["lines", "one_line"])
def test_100_mb_print_is_truncated_and_client_memory_bounded(k: KernelSession, shape: str) -> None:
    code = {
        "lines": "for _ in range(1000):\n    print('x' * 99_999)",
        "one_line": "print('x' * 100_000_000)",
    }[shape]
    before = _rss()
    r = k.execute(code, timeout=80)
    assert r.status == "ok", r.error
    (out,) = r.outputs
    assert "output truncated" in out.text
    assert len(out.text) < 1_100_000
    grown = (_rss() - before) / 2**20
    assert grown < 50, f"client RSS grew by {grown:.0f} MiB"
    next_cell_runs(k)


def test_input_fails_instead_of_hanging(k: KernelSession) -> None:
    r = k.execute("input('your name? ')", timeout=20)
    assert r.status == "error"
    assert r.error.ename == "StdinNotImplementedError"
    next_cell_runs(k)


# ---------------------------------------------------------------- isolation
def test_api_key_is_not_in_the_kernel(k: KernelSession) -> None:
    r = k.execute(
        "import os\n"
        f"leaked = any({SECRET!r} in v for v in os.environ.values())\n"
        "print(os.environ.get('OPENAI_API_KEY'), leaked)"
    )
    assert r.outputs[0].text == "None False\n"
    next_cell_runs(k)


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1 that records whether anyone connected."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    hits: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            hits.append(conn)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the server is real: the host can reach it
    deadline = time.monotonic() + 2
    while not hits and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(hits) == 1
    hits.clear()
    yield port
    stop.set()
    thread.join(2)
    server.close()
    assert hits == [], "the kernel reached the host's loopback"


def test_host_loopback_is_out_of_reach(k: KernelSession, sandboxed: None, host_server: int) -> None:
    r = k.execute(
        f"import socket\nsocket.create_connection(('127.0.0.1', {host_server}), timeout=2)"
    )
    assert r.status == "error"
    assert r.error.ename in ("ConnectionRefusedError", "OSError", "TimeoutError")
    next_cell_runs(k)


def test_outside_addresses_are_unreachable(k: KernelSession, sandboxed: None) -> None:
    # in its own network namespace the kernel has only a loopback: no packet leaves
    r = k.execute("import socket\nprint([name for _, name in socket.if_nameindex()])")
    assert r.outputs[0].text == "['lo']\n"
    r = k.execute("import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=2)")
    assert r.status == "error"
    assert "unreachable" in error_of(r)
    next_cell_runs(k)


def test_filesystem_is_read_only_except_the_work_dir(
    k: KernelSession, sandboxed: None, work: Path
) -> None:
    # the host's home is not the kernel's (that is a private /tmp), and the user's dir is a view
    targets = ("/etc/kernel-agent-test", str(Path.home() / "kernel-agent-test"), str(work / "x"))
    for target in targets:
        r = k.execute(f"open({target!r}, 'w')")
        assert r.status == "error", target
        assert r.error.ename in ("OSError", "PermissionError", "FileNotFoundError"), error_of(r)
    assert not any(Path(t).exists() for t in targets)
    r = k.execute(
        "open('written-by-kernel.txt', 'w').write('ok')\n"
        "import tempfile\nprint(tempfile.mkstemp()[1])"
    )
    assert r.status == "ok", r.error
    assert (k.kernel_cwd / "written-by-kernel.txt").read_text() == "ok"
    assert not Path(r.outputs[0].text.strip()).exists()  # that /tmp was private
    next_cell_runs(k)


def test_no_other_processes_are_visible(k: KernelSession, sandboxed: None) -> None:
    code = (
        "import os\n"
        "for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):\n"
        "    try:\n"
        "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()\n"
        "    except OSError:\n"
        "        cmd = '?'\n"
        "    print(pid, cmd or '-')\n"
        "print('self', os.getpid())"
    )
    lines = k.execute(code).outputs[0].text.splitlines()
    own = int(lines.pop().split()[1])
    seen = {int(line.split(" ", 1)[0]): line.split(" ", 1)[1] for line in lines}
    assert own in seen and 1 in seen
    assert len(seen) < len(psutil.pids())
    assert "bwrap" in seen[1] and "ipykernel" in seen[own]
    # besides bwrap's init: the unprivileged bwrap that turns user namespaces off (as root)
    guard = "--unshare-user --disable-userns"
    strangers = {p: c for p, c in seen.items() if p not in (1, own) and guard not in c}
    assert strangers == {}, "only bwrap's init and the kernel live in the sandbox"
    next_cell_runs(k)
