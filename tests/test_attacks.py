"""The security review's attacks, replayed: each must fail to escape the sandbox.

Kernel code plays the malicious model (or a prompt-injected data file). Where the
attack goes through the agent, it runs through the real CLI with the scripted model
server, on a real sandboxed kernel; the rest drive a sandboxed kernel directly. Each
test names the review's item it replays. The README's second fault table lists them.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pty
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from fake_openai import run_cell, text

from kernel_agent.errors import ConfigError, SandboxError
from kernel_agent.executors.kernel import KernelSession
from kernel_agent.sandbox import bwrap_problem, make_launcher
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(180)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no bwrap sandbox here: {PROBLEM}")
IS_ROOT = os.geteuid() == 0
as_root = pytest.mark.skipif(
    not IS_ROOT, reason="the review's attacks target an agent running as root"
)


def png(payload: bytes) -> str:
    """A cell body that displays an 'image/png' whose bytes are ``payload``."""
    data = base64.b64encode(payload).decode()
    return f"from IPython.display import display\ndisplay({{'image/png': {data!r}}}, raw=True)\n"


def cli(args: list[str], cwd: Path, *, env_extra: dict[str, str] | None = None, **kw):  # noqa: ANN003
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=150, **kw,
    )  # fmt: skip


def model(fake) -> list[str]:  # noqa: ANN001
    return ["--base-url", fake.base_url, "--model", "test"]


def victim(tmp_path: Path, mode: int = 0o600) -> Path:
    """A root-only file outside every work dir, which no attack may change."""
    secret = tmp_path / "outside" / "victim"
    secret.parent.mkdir(mode=0o700)
    secret.write_bytes(b"original")
    secret.chmod(mode)
    return secret


def outputs_of(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", "") or json.dumps(out.get("data", {})))
            if out.get("output_type") == "error":
                texts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(texts)


# ------------------------------------------------- 1. root writes kernel-chosen bytes
@needs_bwrap
@as_root
def test_1_image_saving_does_not_follow_a_planted_link(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    """make demo's layout: --cwd notebooks --notebook notebooks/demo.ipynb."""
    target = victim(tmp_path)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    plant = (
        "import os\n"
        f"for base in ('.', {str(notebooks)!r}):\n"
        "    try:\n"
        "        os.makedirs(os.path.join(base, 'demo_files'), exist_ok=True)\n"
        "        for i in range(4):\n"
        f"            os.symlink({str(target)!r}, os.path.join(base, 'demo_files', f'cell1_{{i}}.png'))\n"
        "        print('planted in', base)\n"
        "    except OSError as e:\n"
        "        print('refused', base, type(e).__name__)\n"
    )
    fake_llm.enqueue(run_cell(plant + png(b"* * * * * root touch /pwned\n")), text("done"))
    nb = notebooks / "demo.ipynb"
    proc = cli(
        ["run", *model(fake_llm), "--cwd", str(notebooks), "--notebook", str(nb), "go"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == b"original"
    assert f"refused {notebooks} PermissionError" in outputs_of(nb) or "OSError" in outputs_of(nb)
    (saved,) = (notebooks / "demo_files").iterdir()
    assert saved.is_file() and not saved.is_symlink()  # the host wrote its own file
    assert saved.read_bytes().startswith(b"* * * * *")


@needs_bwrap
@as_root
def test_1_the_kernel_cannot_rename_or_replace_the_notebook_dir(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    """The default layout: the kernel tried to rename notebooks/ to plant its own."""
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    code = (
        "import os\n"
        f"p = {str(project)!r}\n"
        "for step in (lambda: os.rename(p + '/notebooks', p + '/moved'),\n"
        "             lambda: os.symlink('/etc', p + '/evil')):\n"
        "    try:\n"
        "        step(); print('ESCAPED')\n"
        "    except OSError as e:\n"
        "        print('refused', type(e).__name__)\n"
    )
    fake_llm.enqueue(run_cell(code), text("done"))
    nb = project / "notebooks" / "run.ipynb"
    proc = cli(["run", *model(fake_llm), "--notebook", str(nb), "go"], project)
    assert proc.returncode == 0, proc.stderr
    out = outputs_of(nb)
    assert "ESCAPED" not in out and out.count("refused") == 2
    assert sorted(os.listdir(project)) == ["notebooks"]


def test_1_notebook_mode_comes_from_the_file_itself_never_a_link(tmp_path: Path) -> None:
    """A link at the clean notebook's path to a 06777 file once gave -rwsrwsrwx root."""
    from kernel_agent.notebook.transcript import write_notebook_atomic

    target = tmp_path / "setuid-target"
    target.write_text("x")
    target.chmod(0o6777)
    path = tmp_path / "run.clean.ipynb"
    path.symlink_to(target)
    write_notebook_atomic(nbformat.v4.new_notebook(), path)
    st = path.lstat()
    assert stat.S_ISREG(st.st_mode) and not st.st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert target.read_text() == "x"  # the link was replaced, not followed
    (tmp_path / "plain.ipynb").write_text("{}")
    (tmp_path / "plain.ipynb").chmod(0o4755)
    write_notebook_atomic(nbformat.v4.new_notebook(), tmp_path / "plain.ipynb")
    assert stat.S_IMODE((tmp_path / "plain.ipynb").lstat().st_mode) == 0o755


# ------------------------------------------------- 2. no grants on the user's directories
@needs_bwrap
@as_root
def test_2_a_run_leaves_the_users_directory_as_it_was(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    """The kernel replaced .bashrc and moved .ssh aside when run from a home directory."""
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("safe\n")
    (home / "data.csv").write_text("a\n1\n")
    before = {
        p.name: (p.stat().st_mode, p.stat().st_uid, p.stat().st_gid)
        for p in [home, *home.iterdir()]
    }
    code = (
        "import os\n"
        "print(open('data.csv').read().split())\n"
        "for step in (lambda: os.rename('.ssh', '.ssh-moved'),\n"
        "             lambda: os.remove('.bashrc'),\n"
        "             lambda: open('.bashrc', 'w').write('pwned')):\n"
        "    try:\n"
        "        step()\n"
        "    except OSError as e:\n"
        "        print('refused', type(e).__name__)\n"
    )
    fake_llm.enqueue(run_cell(code), text("done"))
    nb = tmp_path / "nb" / "run.ipynb"
    proc = cli(["run", *model(fake_llm), "--notebook", str(nb), "--verify", "go"], home)
    assert proc.returncode == 0, proc.stderr
    assert "['a', '1']" in outputs_of(nb)  # the user's file was readable
    after = {
        p.name: (p.stat().st_mode, p.stat().st_uid, p.stat().st_gid)
        for p in [home, *home.iterdir()]
    }
    assert after == before
    assert (home / ".bashrc").read_text() == "safe\n" and (home / ".ssh").is_dir()
    nb_dir = nb.parent.stat()
    assert nb_dir.st_gid == 0 and not nb_dir.st_mode & stat.S_ISGID  # verify granted nothing


@pytest.mark.parametrize("where", ["/tmp", "/", "HOME"])
def test_2_tmp_root_and_home_are_refused(fake_llm, tmp_path: Path, where: str) -> None:  # noqa: ANN001
    cwd = str(Path.home()) if where == "HOME" else where
    before = os.stat(cwd)
    proc = cli(
        ["run", *model(fake_llm), "--cwd", cwd, "--notebook", str(tmp_path / "x.ipynb"), "go"],
        tmp_path,
    )
    assert proc.returncode == 2 and "refusing" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    after = os.stat(cwd)
    assert (after.st_mode, after.st_gid) == (before.st_mode, before.st_gid)


# ------------------------------------------------- 3. kernels cannot reach each other
@needs_bwrap
@as_root
def test_3_two_kernels_have_their_own_uid_and_cannot_reach_each_other(tmp_path: Path) -> None:
    s = Settings(cwd=tmp_path, home=tmp_path / "h", max_processes=40)
    a_launcher, b_launcher = make_launcher(s, tmp_path), make_launcher(s, tmp_path)
    with (
        KernelSession(cwd=tmp_path, launcher=a_launcher) as a,
        KernelSession(cwd=tmp_path, launcher=b_launcher) as b,
    ):
        info = a.execute(
            "import os, json\n"
            "open('secret.txt', 'w').write('a-only'); os.chmod('secret.txt', 0o600)\n"
            "print(json.dumps([os.getuid(), os.getcwd()]))"
        )
        a_uid, a_cwd = json.loads(info.outputs[0].text)
        (a_room,) = a_launcher._rooms.values()
        probe = b.execute(
            "import os, json\n"
            "res = {}\n"
            f"for p in [{a_cwd + '/secret.txt'!r}, {str(a_room.conn / 'kernel.json')!r}, {str(a_room.root)!r}]:\n"
            "    try:\n"
            "        open(p).read() if not os.path.isdir(p) else os.listdir(p); res[p] = 'READ'\n"
            "    except OSError as e:\n"
            "        res[p] = type(e).__name__\n"
            "print(json.dumps([os.getuid(), res]))"
        )
        b_uid, seen = json.loads(probe.outputs[0].text)
        assert a_uid != b_uid and a_uid != 0 and b_uid != 0
        assert "READ" not in seen.values(), seen
        # one kernel spends its whole process budget; the other can still start processes
        a.execute(
            "import subprocess\nprocs = []\n"
            "try:\n"
            "    for _ in range(200): procs.append(subprocess.Popen(['sleep', '30']))\n"
            "except OSError as e:\n"
            "    print('capped at', len(procs))\n"
        )
        r = b.execute(
            "import subprocess; print(subprocess.run(['echo', 'b-can-fork'], capture_output=True, text=True).stdout)"
        )
        assert "b-can-fork" in r.outputs[0].text
        a.execute("for p in procs: p.kill()")


# ------------------------------------------------- 4. a planted launcher never runs
PLANTED = "open({marker!r}, 'w').write('ran')\nraise SystemExit('planted launcher ran')\n"


@needs_bwrap
@pytest.mark.parametrize("mode", ["auto", "none"])
def test_4_a_planted_ipykernel_launcher_is_not_imported(tmp_path: Path, mode: str) -> None:
    launcher = make_launcher(Settings(cwd=tmp_path, home=tmp_path / "h", sandbox=mode), tmp_path)
    with KernelSession(cwd=tmp_path, launcher=launcher) as k:
        marker = "/tmp/planted-marker"  # the kernel's own (private) /tmp when sandboxed
        body = PLANTED.format(marker=marker)
        r = k.execute(f"open('ipykernel_launcher.py', 'w').write({body!r})")
        assert r.ok, r.error
        k.restart()  # same work dir: the next start must not import the planted file
        r = k.execute(
            f"import os; print(os.path.exists({marker!r}), os.path.exists('ipykernel_launcher.py'))"
        )
        assert r.outputs[0].text == "False True\n"


@needs_bwrap
def test_4_verify_does_not_run_a_launcher_planted_in_the_users_dir(tmp_path: Path) -> None:
    from kernel_agent.notebook.verify import verify_notebook

    marker = tmp_path / "verify-marker"
    (tmp_path / "ipykernel_launcher.py").write_text(PLANTED.format(marker=str(marker)))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    cell = nbformat.v4.new_code_cell("print(6 * 7)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    nb.cells = [cell]
    path = tmp_path / "check.ipynb"
    nbformat.write(nb, path)
    report = verify_notebook(path)
    assert report.reproduced, report.summary()
    assert not marker.exists()


# ------------------------------------------------- 5. the Python API fails closed
@as_root
def test_5_the_api_refuses_a_root_kernel_without_bwrap(tmp_path: Path) -> None:
    from kernel_agent import Agent

    settings = Settings(cwd=tmp_path, home=tmp_path / "h", sandbox="auto", bwrap_path=str(tmp_path / "no-bwrap"),
                        base_url="http://127.0.0.1:9/v1", model="x", api_key="k")  # fmt: skip
    with (
        Agent(settings, notebook=tmp_path / "n.ipynb") as agent,
        pytest.raises(SandboxError, match="--sandbox none"),
    ):
        agent.run_to_end("anything")


@needs_bwrap
def test_5_run_result_says_how_the_kernel_was_isolated(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    from kernel_agent import Agent
    from kernel_agent.errors import UnsandboxedKernelWarning

    base = {
        "cwd": tmp_path,
        "home": tmp_path / "h",
        "base_url": fake_llm.base_url,
        "model": "t",
        "api_key": "k",
    }
    fake_llm.enqueue(run_cell("print(1)"), text("1"), run_cell("print(2)"), text("2"))
    with Agent(Settings(**base), notebook=tmp_path / "a.ipynb") as agent:
        assert agent.run_to_end("one").isolation == "bwrap"
    with (
        pytest.warns(UnsandboxedKernelWarning),
        Agent(Settings(**base, sandbox="none"), notebook=tmp_path / "b.ipynb") as agent,
    ):
        assert agent.run_to_end("two").isolation == "none"


# ------------------------------------------------- 6. secrets
SECRETS = {
    "GITHUB_PAT": "ghp_attack1", "GH_PAT": "ghp_attack2",
    "DATABASE_URL": "postgres://u:attack3@db/x", "HTTPS_PROXY": "http://u:attack4@p:1",
    "PIP_INDEX_URL": "https://u:attack5@idx/simple", "MYSQL_PWD": "attack6", "DB_PASSWD": "attack7",
    "AZURE_CREDENTIAL": "attack8", "SLACK_WEBHOOK_URL": "https://hooks/attack9",
    "SENTRY_DSN": "https://attack10@s/1", "COOKIE": "attack11",
}  # fmt: skip


@needs_bwrap
def test_6_no_secret_reaches_the_kernel_and_the_agent_is_out_of_sight(
    fake_llm, tmp_path: Path
) -> None:  # noqa: ANN001
    code = (
        "import os\n"
        "env = ' '.join(os.environ.values())\n"
        "print('LEAKS', [v for v in env.split() if 'attack' in v or 'sk-attack' in v])\n"
        "seen = []\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    try:\n"
        "        seen.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
        "print('PROC', any(b'attack' in s for s in seen))\n"
    )
    fake_llm.enqueue(run_cell(code), text("done"))
    nb = tmp_path / "s.ipynb"
    env = {**SECRETS, "OPENAI_API_KEY": "sk-attack-key"}
    proc = cli(["run", *model(fake_llm), "--notebook", str(nb), "go"], tmp_path, env_extra=env)
    assert proc.returncode == 0, proc.stderr
    out = outputs_of(nb)
    assert "LEAKS []" in out and "PROC False" in out


def test_6_an_api_key_on_the_command_line_is_warned_about(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    fake_llm.enqueue(text("no code needed"), text("still none"))
    proc = cli(["run", *model(fake_llm), "--api-key", "sk-visible", "--sandbox", "none",
                "--notebook", str(tmp_path / "k.ipynb"), "go"], tmp_path)  # fmt: skip
    assert "visible to other users" in proc.stderr


# ------------------------------------------------- 7. weaker points
@pytest.fixture
def sandboxed(tmp_path: Path):  # noqa: ANN201
    if PROBLEM is not None:
        pytest.skip(f"no bwrap sandbox here: {PROBLEM}")
    launcher = make_launcher(
        Settings(cwd=tmp_path, home=tmp_path / "h", memory_limit_mb=600, tmpfs_mb=32), tmp_path
    )
    with KernelSession(cwd=tmp_path, launcher=launcher, interrupt_grace=2) as k:
        yield k, launcher


def test_7_memory_is_bounded_for_the_whole_sandbox(sandboxed) -> None:  # noqa: ANN001
    k, launcher = sandboxed
    if "cgroup" not in launcher.status.bounds:
        pytest.skip(
            f"no cgroup can be made on this host: limits are per process ({launcher.status.bounds})"
        )
    r = k.execute(
        "import subprocess, sys\n"
        "hog = 'b = bytearray(350 * 2**20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\nimport time; time.sleep(20)'\n"
        "ps = [subprocess.Popen([sys.executable, '-c', hog]) for _ in range(3)]\n"
        "import time; time.sleep(6)\n"
        "print(sorted(p.poll() is not None for p in ps))\n"
        "for p in ps: p.kill()\n",
        timeout=60,
    )
    # three 350 MB processes under a 600 MB bound: the kernel itself or a hog was killed
    assert r.status == "died" or "True" in r.outputs[0].text, r.outputs


def test_7_private_tmp_and_shm_are_size_limited(sandboxed) -> None:  # noqa: ANN001
    k, _ = sandboxed
    for where in ("/tmp", "/dev/shm"):
        r = k.execute(
            f"with open({where!r} + '/big', 'wb') as f:\n"
            "    for _ in range(64): f.write(b'0' * 2**20)\n"
        )
        assert r.status == "error" and "No space left" in str(r.error), where


def test_7_host_unix_sockets_are_out_of_reach(sandboxed) -> None:  # noqa: ANN001
    k, _ = sandboxed
    paths = []
    servers = []
    for folder in ("/run", "/var/tmp"):
        if not os.path.isdir(folder):
            continue
        path = f"{folder}/ka-attack-{uuid.uuid4().hex[:8]}.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        os.chmod(path, 0o777)
        server.listen()
        servers.append(server)
        paths.append(path)
    try:
        r = k.execute(
            "import socket\n"
            f"for p in {paths!r}:\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n"
            "        s.connect(p); print('CONNECTED', p)\n"
            "    except OSError as e:\n"
            "        print('refused', type(e).__name__)\n"
        )
        assert "CONNECTED" not in r.outputs[0].text and r.outputs[0].text.count("refused") == len(
            paths
        )
    finally:
        for server, path in zip(servers, paths, strict=True):
            server.close()
            os.unlink(path)


def test_7_no_user_namespaces_inside(sandboxed) -> None:  # noqa: ANN001
    k, _ = sandboxed
    r = k.execute(
        "import ctypes, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), subprocess.run(['unshare', '-Ur', 'true']).returncode)"
    )
    rc, unshare_rc = r.outputs[0].text.split()
    assert rc == "-1" and unshare_rc != "0"


def test_7_setuid_files_stay_out_of_reach(sandboxed) -> None:  # noqa: ANN001
    k, launcher = sandboxed
    r = k.execute(
        "import os, shutil; shutil.copy('/bin/true', 'x'); os.chmod('x', 0o4755); print(os.getcwd())"
    )
    made = Path(r.outputs[0].text.strip()) / "x"
    (room,) = launcher._rooms.values()
    assert made.parent == room.work
    # whatever its bits, no one but root can reach it: its parent is a 0700 root dir
    assert (
        stat.S_IMODE(room.root.stat().st_mode) == 0o700 and room.root.stat().st_uid == os.geteuid()
    )


@needs_bwrap
def test_7_kernel_holds_no_terminal_and_escapes_are_shown_not_sent(
    fake_llm, tmp_path: Path
) -> None:  # noqa: ANN001
    code = (
        "import os\n"
        "fds = {}\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        fds[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
        "    except OSError:\n"
        "        pass\n"
        "print('TTY', [t for t in fds.values() if '/dev/pts' in t or '/dev/tty' in t], os.isatty(0))\n"
        "print('\\x1b]0;pwned\\x07\\x1b[2J')\n"
    )
    fake_llm.enqueue(run_cell(code), text("done \x1b]0;answer\x07"), text("done \x1b]0;answer\x07"))
    nb = tmp_path / "t.ipynb"
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "run", *model(fake_llm), "--notebook", str(nb), "go"],
        stdin=terminal, stdout=terminal, stderr=terminal, cwd=tmp_path, env=env, close_fds=True,
    )  # fmt: skip
    os.close(terminal)
    shown = io.BytesIO()
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            shown.write(os.read(controller, 65536))
        except OSError:
            break
    proc.wait(timeout=30)
    os.close(controller)
    assert proc.returncode == 0, shown.getvalue()[-2000:]
    assert "TTY [] False" in outputs_of(nb)
    screen = shown.getvalue()
    assert b"\x1b]0;pwned" not in screen and b"\\x1b]0;pwned" in screen
    assert b"\x1b[2J" not in screen and b"\x1b]0;answer" not in screen


def test_7_a_directory_at_the_clean_path_does_not_lose_the_answer(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    fake_llm.enqueue(run_cell("print(6 * 7)"), text("The answer is 42."))
    nb = tmp_path / "r.ipynb"
    (tmp_path / "r.clean.ipynb").mkdir()
    proc = cli(
        [
            "run",
            *model(fake_llm),
            "--sandbox",
            "none",
            "--format",
            "plain",
            "--notebook",
            str(nb),
            "go",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "The answer is 42."
    assert "no clean notebook" in proc.stderr
    nbformat.validate(nbformat.read(nb, as_version=4))


def test_refusals_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        make_launcher(Settings(sandbox="none"), "/")


# ------------------------------------- the namespace probe the pitfall notes read
@needs_bwrap
def test_a_kernel_forging_what_the_pitfall_notes_read_gets_bounded_notes(
    fake_llm, tmp_path: Path
) -> None:  # noqa: ANN001
    """Kernel code plants objects shaped to steer pandas_pitfalls: a class named Series
    with a megabyte dtype, one whose index raises, and a "frame" with huge column names.
    The probe survives them, the host keeps bounded values, and the note under the cell
    stays short (it quotes the model's code and cut column names, never kernel bytes)."""
    from kernel_agent import Agent

    forge = (
        "class Index:\n"
        "    name = None\n"
        "    nlevels = 1\n"
        "    dtype = 'int64'\n"
        "class Boom:\n"
        "    @property\n"
        "    def name(self): raise RuntimeError('boom')\n"
        "Series = type('Series', (), {'dtype': 'bool' + 'x' * 1_000_000, 'index': Index(),\n"
        "              '__len__': lambda s: 5})\n"
        "Frame = type('DataFrame', (), {'columns': ['c' * 100_000] * 50, 'index': Index(),\n"
        "             'shape': (5, 50), 'idxmax': lambda s: 3})\n"
        "mask, frame = Series(), Frame()\n"
        "bad = type('Series', (), {'dtype': 'bool', 'index': Boom(), '__len__': lambda s: 1})()\n"
        "print('n', len(mask), frame.idxmax(), len(bad))\n"
    )
    fake_llm.enqueue(run_cell(forge), text("done"), text("done"))
    settings = Settings(
        cwd=tmp_path,
        home=tmp_path / "h",
        base_url=fake_llm.base_url,
        model="t",
        api_key="k",
        levers=("pandas_pitfalls",),
    )
    with Agent(settings, notebook=tmp_path / "a.ipynb") as agent:
        result = agent.run_to_end("Which state has the most? @state[name]")
    seen = fake_llm.requests[1].last_user_text
    assert result.status == "ok", seen
    namespace = agent.aio.state.namespace
    assert namespace["mask"].dtype is not None and len(namespace["mask"].dtype) <= 40
    assert all(len(c) <= 80 for c in namespace["frame"].columns or ())
    assert "n 5 3 1" in seen
    assert namespace["frame"].row_numbers and not namespace["bad"].row_numbers
    assert "`frame.idxmax()` is a label of frame's index" in seen  # the note, from our side
    assert "boolx" not in seen and "c" * 81 not in seen
    assert len(seen) < 6000, "the cell's view (and any note) stays within its budget"
