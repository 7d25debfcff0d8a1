"""The red-team review's sandbox rows (2026-11-24), replayed: K2, 5.4, 5.6, I5, 2.6.

K2 goes through the real CLI with the scripted model server, on a real sandboxed
kernel; the rest drive a sandboxed kernel directly.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from fake_openai import run_cell, text

from kernel_agent.errors import KernelStartError
from kernel_agent.sandbox import bwrap_problem, make_launcher
from kernel_agent.sandbox.room import Room, check_sockets, make_room
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(180)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no bwrap sandbox here: {PROBLEM}")
IS_ROOT = os.geteuid() == 0
as_root = pytest.mark.skipif(
    not IS_ROOT, reason="the review's attacks target an agent running as root"
)


class Listener:
    """A root-only unix socket (0600 in a 0700 dir) that counts who connects."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700)
        self.path = folder / "rootonly.sock"
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(self.path))
        self.path.chmod(0o600)
        self.server.listen(16)
        self.server.settimeout(0.1)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.server.close()


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    found = Listener(tmp_path / "victim")
    yield found
    found.close()


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=150,
    )  # fmt: skip


def outputs_of(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)
    return "\n".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []))


K2_ATTACK = """\
import json, os, time
conn = os.path.join(os.path.dirname(os.getcwd()), "c")
info = json.load(open(conn + "/kernel.json"))
done = []
for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
    path = "%s-%d" % (info["ip"], info[name])
    try:
        os.unlink(path)
        os.symlink(TARGET, path)
        done.append("planted")
    except OSError as e:
        done.append(type(e).__name__)
    try:  # a new name beside them, for the next kernel's sockets to meet
        os.symlink(TARGET, conn + "/spare")
        done.append("planted")
    except OSError as e:
        done.append(type(e).__name__)
print(sorted(set(done)), flush=True)
time.sleep(0.5)
os._exit(1)
"""


# ------------------------------------------------- K2: the kernel's ipc paths
@needs_bwrap
@as_root
def test_k2_the_agent_never_reconnects_through_the_kernels_links(
    fake_llm,  # noqa: ANN001
    tmp_path: Path,
    listener: Listener,
) -> None:
    view = tmp_path / "view"
    view.mkdir()
    attack = K2_ATTACK.replace("TARGET", repr(str(listener.path)))
    fake_llm.enqueue(
        run_cell(attack),
        run_cell("print('after the restart', 6 * 7)"),
        text("done"),
    )
    nb = tmp_path / "k2.ipynb"
    proc = cli(
        ["run", "--base-url", fake_llm.base_url, "--model", "test", "--cwd", str(view),
         "--notebook", str(nb), "go"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = outputs_of(nb)
    assert "['PermissionError']" in said  # the kernel could change nothing in its conn dir
    assert "after the restart 42" in said  # the run went on with a new kernel
    assert listener.accepted == 0


def _bound_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


def test_k2_a_link_or_a_stranger_at_an_ipc_path_is_refused(
    tmp_path: Path, listener: Listener
) -> None:
    """The check behind the seal (all that holds for a kernel of the agent's own uid)."""
    conn = tmp_path / "c"
    conn.mkdir()
    good = [conn / "kernel-1", conn / "kernel-2"]
    socks = [_bound_socket(p) for p in good]
    try:
        check_sockets(good, os.geteuid())
        link = conn / "kernel-3"
        link.symlink_to(listener.path)
        with pytest.raises(OSError, match="kernel-3 is not a socket"):
            check_sockets([*good, link], os.geteuid())
        plain = conn / "kernel-4"
        plain.write_text("")
        with pytest.raises(OSError, match="kernel-4 is not a socket"):
            check_sockets([plain], os.geteuid())
        with pytest.raises(OSError, match="belongs to uid"):
            check_sockets(good, os.geteuid() + 1)
        with pytest.raises(OSError, match="kernel-5 is missing"):
            check_sockets([conn / "kernel-5"], os.geteuid())
        check_sockets([conn / "kernel-5"], os.geteuid(), missing_ok=True)
    finally:
        for sock in socks:
            sock.close()
    assert listener.accepted == 0


class _Km:
    """The few kernel-manager attributes the launcher's seal reads."""

    def __init__(self, room: Room) -> None:
        self.ip = str(room.conn / "kernel")
        self.shell_port, self.iopub_port, self.stdin_port = 1, 2, 3
        self.hb_port, self.control_port = 4, 5


def test_k2_the_launcher_treats_a_tampered_conn_dir_as_a_dead_kernel(
    tmp_path: Path, listener: Listener
) -> None:
    launcher = make_launcher(Settings(cwd=tmp_path, home=tmp_path / "h", sandbox="none"), tmp_path)
    room = make_room(os.geteuid(), os.getegid(), None)
    km = _Km(room)
    launcher._rooms[id(km)] = room
    socks = [_bound_socket(room.conn / f"kernel-{port}") for port in (1, 2, 3, 4)]
    try:
        (room.conn / "kernel-5").symlink_to(listener.path)
        with pytest.raises(KernelStartError, match="kernel-5 is not a socket"):
            launcher.seal(km)
        (room.conn / "kernel-5").unlink()
        socks.append(_bound_socket(room.conn / "kernel-5"))
        launcher.seal(km)
    finally:
        for sock in socks:
            sock.close()
        launcher.cleanup(km)
    assert not room.root.exists() and listener.accepted == 0


# ------------------------------------------------- 2.6: the seccomp filter
SYSCALLS_X86_64 = {
    "io_uring_setup": 425, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "keyctl": 250, "add_key": 248, "request_key": 249,
}  # fmt: skip

PROBE_26 = """\
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, nr in SYSCALLS.items():
    ctypes.set_errno(0)
    rc = libc.syscall(nr, 0, 0, 0, 0, 0)
    out[name] = "ok" if rc >= 0 else errno.errorcode[ctypes.get_errno()]
for name, args in (("netlink_audit", (socket.AF_NETLINK, socket.SOCK_RAW, 9)),
                   ("netlink_uevent", (socket.AF_NETLINK, socket.SOCK_RAW, 15)),
                   ("vsock", (40, socket.SOCK_STREAM, 0)),
                   ("netlink_route", (socket.AF_NETLINK, socket.SOCK_RAW, 0)),
                   ("unix", (socket.AF_UNIX, socket.SOCK_STREAM, 0))):
    try:
        socket.socket(*args).close(); out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
status = open("/proc/self/status").read()
out["seccomp"] = [l.split()[1] for l in status.splitlines() if l.startswith("Seccomp:")][0]
print(out)
"""


@needs_bwrap
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers of x86_64")
def test_26_the_seccomp_filter_refuses_kernel_attack_surface(tmp_path: Path) -> None:
    from kernel_agent.executors.kernel import KernelSession
    from kernel_agent.sandbox.seccomp import filter_bpf

    if filter_bpf() is None:
        pytest.skip("pyseccomp or libseccomp is not installed here")
    launcher = make_launcher(Settings(cwd=tmp_path, home=tmp_path / "h"), tmp_path)
    assert any(note.startswith("seccomp:") for note in launcher.status.notes)
    with KernelSession(cwd=tmp_path, launcher=launcher) as k:
        r = k.execute(PROBE_26.replace("SYSCALLS", repr(SYSCALLS_X86_64)))
    assert r.status == "ok", r.error
    import ast

    out = ast.literal_eval(r.outputs[0].text)
    assert out["seccomp"] == "2"  # a filter is loaded
    for name in SYSCALLS_X86_64:
        assert out[name] == "EPERM", (name, out)
    assert out["netlink_audit"] == out["netlink_uevent"] == out["vsock"] == "EAFNOSUPPORT", out
    assert out["netlink_route"] == out["unix"] == "ok", out  # what zmq and Python need


# ------------------------------------------------- 5.4: the work dir's disk
FILL_54 = """\
import os
made = 0
for i in range(3):
    fd = os.open("fill%d.bin" % i, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, 1023 * 2**20); made += 1
    except OSError as e:
        print("refused", e.strerror)
    finally:
        os.close(fd)
st = os.statvfs(".")
print("made", made, "size_mb", st.f_blocks * st.f_frsize // 2**20)
"""


@needs_bwrap
@as_root
def test_54_the_work_dir_cannot_fill_the_hosts_disk(tmp_path: Path) -> None:
    from kernel_agent.executors.kernel import KernelSession

    launcher = make_launcher(
        Settings(cwd=tmp_path, home=tmp_path / "h", work_disk_mb=256), tmp_path
    )
    free_before = os.statvfs("/tmp").f_bavail * os.statvfs("/tmp").f_frsize
    with KernelSession(cwd=tmp_path, launcher=launcher) as k:
        (room,) = launcher._rooms.values()
        if room.disk_mb is None:
            pytest.skip("no loop device or mkfs.ext4 here: the work dir is a plain directory")
        r = k.execute(FILL_54, timeout=60)
        free_during = os.statvfs("/tmp").f_bavail * os.statvfs("/tmp").f_frsize
        assert os.path.ismount(room.work)
    assert r.status == "ok", r.error
    said = r.outputs[0].text
    assert "refused No space left on device" in said and "made 0" in said, said
    assert 200 < int(said.split("size_mb")[1]) <= 256
    assert free_before - free_during < 300 * 2**20  # was 3.2 GB (the review's 5.4)
    assert not room.root.exists() and not os.path.ismount(room.work)
    assert "256 MB filesystem" in " ".join(launcher.status.notes)


# ------------------------------------------------- 2.5: host unix sockets
@needs_bwrap
@as_root
@pytest.mark.parametrize("parent", ["/var/lib", "/srv", "/run", "/var/tmp", "/opt", "checkout"])
def test_25_a_world_writable_host_socket_is_out_of_reach(tmp_path: Path, parent: str) -> None:
    """The review's SOCKDIR: a 0755 root dir under /var/lib holding a 0777 socket; and
    the same anywhere else not bound into the sandbox (/opt, beside this checkout)."""
    from crossing import CHECKOUT_PARENT

    parent = str(CHECKOUT_PARENT) if parent == "checkout" else parent
    from kernel_agent.executors.kernel import KernelSession

    if not os.path.isdir(parent) or os.path.islink(parent):
        pytest.skip(f"no {parent} here")
    import tempfile

    sockdir = Path(tempfile.mkdtemp(prefix="ka-attack-", dir=parent))
    sockdir.chmod(0o755)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sockdir / "svc.sock"))
    (sockdir / "svc.sock").chmod(0o777)
    server.listen()
    try:
        launcher = make_launcher(Settings(cwd=tmp_path, home=tmp_path / "h"), tmp_path)
        with KernelSession(cwd=tmp_path, launcher=launcher) as k:
            r = k.execute(
                "import socket\ns = socket.socket(socket.AF_UNIX)\n"
                "try:\n"
                f"    s.connect({str(sockdir / 'svc.sock')!r}); print('CONNECTED')\n"
                "except OSError as e:\n"
                "    print('refused', type(e).__name__)\n"
            )
        assert r.outputs[0].text == "refused FileNotFoundError\n", r.outputs
    finally:
        server.close()
        import shutil

        shutil.rmtree(sockdir, ignore_errors=True)


# ------------------------------------------------- K1: the host's other files
K1_MARKER = "K1-PLANTED-HOST-FILE"
K1_PROBE = """\
import json, os
seen = {}
for d in DIRS:
    try:
        seen[d] = sorted(os.listdir(d))
    except OSError as e:
        seen[d] = type(e).__name__
read = {}
for f in FILES:
    try:
        read[f] = open(f).read()
    except OSError as e:
        read[f] = type(e).__name__
print(json.dumps({"seen": seen, "read": read}))
"""
K1_WORK = """\
import matplotlib
matplotlib.use("agg")
import matplotlib.pyplot as plt, pandas as pd
frame = pd.read_csv("data.csv")
plt.plot(frame.x, frame.y)
plt.savefig("plot.png")
open("out.txt", "w").write("written")
print(len(frame), os.path.getsize("plot.png") > 1000, open("out.txt").read())
"""


def _bound(argv: list[str]) -> tuple[set[str], set[str]]:
    """What a kernel's bwrap command line puts in its filesystem: the trees bound in
    whole, and every path made (directories, links, mounts, binds)."""
    trees: set[str] = set()
    made: set[str] = set()
    for i, arg in enumerate(argv):
        if arg in ("--bind", "--ro-bind", "--symlink"):
            made.add(argv[i + 2])
            if arg != "--symlink":
                trees.add(argv[i + 2])
        elif arg in ("--dir", "--tmpfs", "--dev", "--proc"):
            made.add(argv[i + 1])
            if arg != "--dir":
                trees.add(argv[i + 1])
    return trees, made


@needs_bwrap
def test_k1_the_kernel_sees_only_what_was_bound_in(tmp_path: Path) -> None:
    """Listings of the host's other places, and world-readable files planted in fresh
    directories all over the host: only the bound paths (and the way to them) show."""
    from crossing import CHECKOUT_PARENT, planted_dirs

    from kernel_agent.executors.kernel import KernelSession

    view = tmp_path / "view"
    view.mkdir()
    (view / "data.csv").write_text("x,y\n1,2\n2,4\n")
    with planted_dirs(K1_MARKER) as planted:
        assert len(planted) >= 3, planted  # /var/tmp, /opt or /srv, the checkout's parent...
        dirs = ["/", "/home", "/root", "/opt", "/work", "/srv", "/var", "/etc", "/run",
                str(CHECKOUT_PARENT), *map(str, planted)]  # fmt: skip
        files = [str(p / "planted.txt") for p in planted]
        files += ["/etc/shadow", "/etc/hostname", "/proc/1/environ", str(Path.home() / ".bashrc")]
        launcher = make_launcher(Settings(cwd=view, home=tmp_path / "h"), view)
        with KernelSession(cwd=view, launcher=launcher) as k:
            probe = f"DIRS = {dirs!r}\nFILES = {files!r}\n" + K1_PROBE
            r = k.execute(probe)
            work = k.execute("import os\n" + K1_WORK)
            argv = list(k._manager().kernel_spec.argv)
    assert r.status == "ok", r.error
    import json

    found = json.loads(r.outputs[0].text)
    assert K1_MARKER not in r.outputs[0].text
    trees, made = _bound(argv)

    def shown(path: str) -> bool:
        p = Path(path)
        return (
            path in made
            or any(t == "/" or Path(t) in p.parents for t in trees)
            or any(Path(path) in Path(m).parents for m in made)
        )

    for folder, entries in found["seen"].items():
        if isinstance(entries, str):
            continue  # not there at all
        stray = [e for e in entries if not shown(os.path.join(folder, e))]
        assert stray == [], (folder, stray)
    for folder in planted:
        assert found["seen"][str(folder)] == "FileNotFoundError"
    assert all(found["read"][f] in {"FileNotFoundError", "PermissionError"} for f in files)
    assert found["seen"]["/home"] == "FileNotFoundError" or found["seen"]["/home"] == []
    assert set(found["seen"]["/"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32",
                                       "proc", "root", "sbin", "sys", "tmp", "usr", "work",
                                       "opt", "home"}  # fmt: skip
    # ... and the kernel still has its tools, the view and its work dir
    assert work.status == "ok", work.error
    assert work.outputs[0].text == "2 True written\n"


@needs_bwrap
def test_k1_bash_and_its_tools_still_work_on_what_is_bound(tmp_path: Path) -> None:
    """bash_kernel in the same filesystem: coreutils, awk (an alternatives link), Python."""
    from kernel_agent.executors.kernel import KernelSession

    view = tmp_path / "view"
    view.mkdir()
    (view / "data.csv").write_text("x,y\n1,2\n")
    launcher = make_launcher(Settings(cwd=view, home=tmp_path / "h"), view)
    with KernelSession("bash", cwd=view, launcher=launcher) as k:
        r = k.execute(
            "awk -F, 'NR==2 {print $2}' data.csv; echo w > out.txt; cat out.txt\n"
            "ls /home 2>&1 | head -c 40; echo; python3 -c 'print(6 * 7)'"
        )
    assert r.status == "ok", r.error
    lines = r.outputs[0].text.splitlines()
    assert lines[:2] == ["2", "w"], lines
    assert "No such file" in lines[2] and lines[3] == "42", lines


@needs_bwrap
def test_k1_the_views_links_show_what_the_kernels_uid_could_reach_and_no_more(
    tmp_path: Path,
) -> None:
    """A view linking data kept elsewhere (world-readable, reachable) still reads it; a
    link to a world-readable file behind a directory closed to others does not open it,
    nor does a link to a file the kernel's uid may not read."""
    from crossing import planted_dirs

    from kernel_agent.executors.kernel import KernelSession

    view = tmp_path / "view"
    view.mkdir()
    view.chmod(0o755)
    with planted_dirs("linked data") as (shared, elsewhere, *_):
        closed = Path(tempfile.mkdtemp(prefix="closed-", dir=elsewhere))
        closed.chmod(0o700)
        (closed / "behind.txt").write_text("BEHIND-A-CLOSED-DIR")
        (closed / "behind.txt").chmod(0o644)
        (shared / "private.txt").write_text("PRIVATE-0600")
        (shared / "private.txt").chmod(0o600)
        (view / "data").symlink_to(shared)
        (view / "behind.txt").symlink_to(closed / "behind.txt")
        (view / "private.txt").symlink_to(shared / "private.txt")
        launcher = make_launcher(Settings(cwd=view, home=tmp_path / "h"), view)
        with KernelSession(cwd=view, launcher=launcher) as k:
            r = k.execute(
                "for p in ('data/planted.txt', 'behind.txt', 'private.txt'):\n"
                "    try:\n"
                "        print(p, open(p).read())\n"
                "    except OSError as e:\n"
                "        print(p, type(e).__name__)\n"
            )
    assert r.status == "ok", r.error
    said = r.outputs[0].text.splitlines()
    assert said[0] == "data/planted.txt linked data"
    assert said[1] == "behind.txt FileNotFoundError"  # not bound: its dir is closed to others
    if IS_ROOT:  # the kernel has a uid of its own: the file's mode keeps it out
        assert said[2] == "private.txt PermissionError"
