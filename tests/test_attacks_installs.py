"""Attacks on the host's pip (review 2026-11-24, rows H1, H2, D2, D3, D4).

A notebook from someone else names packages in ``metadata.kernel_agent.installs``;
the kernel's code names them in ``install_package(...)``. Either way the host runs
pip. The index here is a local ``--find-links`` directory (``PIP_NO_INDEX``, no
network) holding hand-made sdists whose ``setup.py`` writes a marker file with its
uid and ``OPENAI_API_KEY``: a marker means an attacker's code ran on the host.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text
from wheelfactory import build_wheel

from kernel_agent.agent import Agent
from kernel_agent.errors import InstallError
from kernel_agent.events import RunFinished
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.tools.installs import InstallPolicy, check_rerun, new_site
from kernel_agent.tools.pip_runner import (
    PipJail,
    pip_argv,
    pip_environment,
    pip_jail,
    run_jailed,
    run_pip,
)
from kernel_agent.tools.requirements import MAX_PINS, Pin, parse_pins, parse_request

pytestmark = pytest.mark.timeout(180)

SANDBOX = "none" if bwrap_problem()[0] else "bwrap"
SECRET = "sk-env-SECRET-installs"

SETUP_PY = """\
import json, os
with open(os.path.join({markers!r}, "{name}-built-" + str(os.getpid())), "w") as f:
    json.dump({{"uid": os.getuid(), "key": os.environ.get("OPENAI_API_KEY")}}, f)
from setuptools import setup
setup(name="{name}", version="{version}", py_modules=[])
"""


def build_sdist(where: Path, name: str, version: str, markers: Path) -> Path:
    """An sdist whose ``setup.py`` leaves a marker in ``markers`` when anything runs it."""
    root = f"{name}-{version}"
    files = {
        f"{root}/setup.py": SETUP_PY.format(markers=str(markers), name=name, version=version),
        f"{root}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    sdist = where / f"{root}.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for path, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    sdist.chmod(0o644)
    return sdist


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    where = tmp_path / "markers"
    where.mkdir()
    where.chmod(0o1777)  # a build as any uid could leave its marker
    return where


@pytest.fixture
def links(tmp_path: Path, markers: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The attacker's index: sdists only for evilpkg, rt24evil and tinypkg 0.5; one honest
    wheel (tinypkg 1.0). pip sees nothing else: no index, no config files."""
    where = tmp_path / "links"
    where.mkdir()
    where.chmod(0o755)  # pip reads it as a leased uid
    build_sdist(where, "evilpkg", "1.0", markers)
    build_sdist(where, "rt24evil", "1.0", markers)
    build_sdist(where, "tinypkg", "0.5", markers)
    build_wheel(where, "tinypkg", "1.0", "VALUE = 'one'\n").chmod(0o644)
    for name, value in pip_env(where).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return where


def pip_env(links: Path) -> dict[str, str]:
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}


def built(markers: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in markers.iterdir()]


def cli(args: list[str], cwd: Path, links: Path, **kw):  # noqa: ANN003
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "KERNEL_AGENT_"))}
    env.update(pip_env(links), OPENAI_API_KEY=SECRET)
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=150, **kw,
    )  # fmt: skip


def shared_notebook(where: Path, installs: dict[str, str], code: str, output: str) -> Path:
    """A notebook 'from someone else': one cell, its output, and what it says to install."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["kernel_agent"] = {"task": "a shared analysis", "installs": installs}
    cell = nbformat.v4.new_code_cell(code, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    nb.cells = [cell]
    where.mkdir(exist_ok=True)
    path = where / "shared.ipynb"
    nbformat.write(nb, path)
    return path


# ------------------------------------------------------------ the fixture is armed
def test_control_plain_pip_runs_the_sdists_setup_py(links: Path, markers: Path, tmp_path: Path):
    """Without our flags, pip builds the sdist and its setup.py runs: the marker appears.
    (No build isolation: the index here has no setuptools to fetch.)"""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
         "--target", str(tmp_path / "t"), "evilpkg==1.0"],
        capture_output=True, env={**os.environ, **pip_env(links)}, timeout=120,
    )  # fmt: skip
    assert [m["key"] for m in built(markers)] == [SECRET]


# ------------------------------------------------------------ H1/H2: verify
def test_h2_verify_refuses_an_option_smuggled_in_as_a_package_name(
    links: Path, markers: Path, tmp_path: Path
) -> None:
    nb = shared_notebook(
        tmp_path / "view",
        {f"--find-links=file://{links}?": "1", "evilpkg": "1.0"},
        "print(6 * 7)",
        "42\n",
    )
    for policy in ("never", "any"):
        proc = cli(["verify", str(nb), "--install", policy], tmp_path / "view", links)
        assert proc.returncode == InstallError.exit_code, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert lines[0].startswith("kernel-agent: error: shared.ipynb: "), lines
        assert "'--find-links=file://" in lines[0] and "is not a package name" in lines[0]
        assert proc.stdout == ""  # no kernel ran, nothing was verified
    assert built(markers) == []


def test_h1_verify_installs_nothing_a_notebook_names_unless_told(
    links: Path, markers: Path, tmp_path: Path
) -> None:
    nb = shared_notebook(tmp_path / "view", {"evilpkg": "1.0"}, "print(6 * 7)", "42\n")
    began = time.monotonic()
    proc = cli(["verify", str(nb)], tmp_path / "view", links)
    assert proc.returncode == InstallError.exit_code, proc.stderr
    assert proc.stderr.strip() == (
        "kernel-agent: error: shared.ipynb asks to install evilpkg==1.0 before it runs, and "
        "verify installs nothing a notebook names unless told to: pass --install ask, "
        "--install allow:evilpkg or --install any (wheels from your package index, onto this host)"
    )
    assert time.monotonic() - began < 30  # refused before any kernel started
    # another allow list, and 'ask' without a terminal: refused too
    proc = cli(["verify", str(nb), "--install", "allow:pandas"], tmp_path / "view", links)
    assert proc.returncode == InstallError.exit_code
    assert "evilpkg==1.0, which --install allow:pandas does not allow" in proc.stderr
    proc = cli(
        ["verify", str(nb), "--install", "ask"], tmp_path / "view", links, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == InstallError.exit_code
    assert "there is nobody to ask (no terminal)" in proc.stderr
    # told to: pip gets it, and finds no wheel; nothing is built
    proc = cli(["verify", str(nb), "--install", "any"], tmp_path / "view", links)
    assert proc.returncode == InstallError.exit_code, proc.stderr
    assert "pip could not install evilpkg==1.0 (wheels only): ERROR: " in proc.stderr
    assert "No matching distribution found for evilpkg==1.0" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert built(markers) == []


def _verify_on_a_terminal(nb: Path, links: Path, answer: bytes) -> tuple[int, str]:
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "KERNEL_AGENT_"))}
    env.update(pip_env(links), OPENAI_API_KEY=SECRET)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "verify", str(nb), "--install", "ask",
         "--sandbox", SANDBOX],
        stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=nb.parent, env=env,
        text=True,
    )  # fmt: skip
    os.close(terminal)
    try:
        os.write(controller, answer)
        out, err = proc.communicate(timeout=150)
    finally:
        os.close(controller)
    return proc.returncode, out + err


def test_verify_ask_asks_on_the_terminal_and_installs_wheels_when_told_yes(
    links: Path, markers: Path, tmp_path: Path
) -> None:
    nb = shared_notebook(
        tmp_path / "view", {"TinyPkg": "1.0"}, "import tinypkg\nprint(tinypkg.VALUE)", "one\n"
    )
    status, said = _verify_on_a_terminal(nb, links, b"n\n")
    assert status == InstallError.exit_code, said
    assert "shared.ipynb asks to install tinypkg==1.0 (wheels from your package index" in said
    assert "Install? [y/N]" in said and "tinypkg==1.0: declined" in said
    status, said = _verify_on_a_terminal(nb, links, b"y\n")
    assert status == 0, said
    assert "reproduced: 1/1 code cells reproduced" in said
    assert built(markers) == []


def test_verify_of_an_sdist_only_old_version_is_refused_even_when_allowed(
    links: Path, markers: Path, tmp_path: Path
) -> None:
    nb = shared_notebook(tmp_path / "view", {"tinypkg": "0.5"}, "print(1)", "1\n")
    proc = cli(["verify", str(nb), "--install", "allow:tinypkg"], tmp_path / "view", links)
    assert proc.returncode == InstallError.exit_code, proc.stderr
    assert "No matching distribution found for tinypkg==0.5" in proc.stderr
    assert built(markers) == []


# ------------------------------------------------------------ D2/D3/D4: install_package
TRY = (
    "for name in {names!r}:\n"
    "    try:\n"
    "        install_package(name)\n"
    "    except ToolError as e:\n"
    "        print('refused:', e)\n"
)


def run_agent(fake: FakeLLM, tmp_path: Path, names: list[str], install: str) -> list[str]:
    fake.enqueue(run_cell(TRY.format(names=names)), text("done"))
    settings = scripted_settings(fake, tmp_path, sandbox=SANDBOX, levers="none", install=install)
    with Agent(settings) as agent:
        events = list(agent.run("install them"))
    assert isinstance(events[-1], RunFinished)
    return str(events[-1].result.cells[0].outputs[0]["text"]).splitlines()


def test_d2_an_allowed_name_at_an_sdist_only_version_is_not_built(
    fake_llm: FakeLLM, links: Path, markers: Path, tmp_path: Path
) -> None:
    lines = run_agent(
        fake_llm, tmp_path, ["tinypkg==0.5", "TinyPkg==0.5 ", "tinypkg"], "allow:tinypkg"
    )
    assert lines[0].startswith("refused: pip could not install tinypkg==0.5 (wheels only): ERROR:")
    assert "No matching distribution found for tinypkg==0.5" in lines[0]
    assert lines[1] == lines[0]
    assert lines[2] == "installed tinypkg 1.0"  # the wheel: installs work
    assert built(markers) == []


def test_d3_d4_any_does_not_build_an_attackers_sdist_or_take_a_file_name(
    fake_llm: FakeLLM, links: Path, markers: Path, tmp_path: Path
) -> None:
    (tmp_path / "rt24evil.tar.gz").write_bytes((links / "rt24evil-1.0.tar.gz").read_bytes())
    lines = run_agent(
        fake_llm,
        tmp_path,
        ["rt24evil", "rt24evil==1.0", "rt24evil.tar.gz", "./rt24evil.tar.gz", "-e.", "--pre"],
        "any",
    )
    assert lines[0].startswith("refused: pip could not install rt24evil (wheels only): ERROR:")
    assert lines[1].startswith("refused: pip could not install rt24evil==1.0 (wheels only):")
    assert lines[2:] == [
        "refused: install_package: 'rt24evil.tar.gz' is a file name, not a package name",
        "refused: install_package: './rt24evil.tar.gz' is not a package name",
        "refused: install_package: '-e.' is not a package name",
        "refused: install_package: '--pre' is not a package name",
    ]
    assert built(markers) == []


def test_only_binary_alone_stops_the_build_without_the_jail(
    links: Path, markers: Path, tmp_path: Path
) -> None:
    """The flags hold even where pip runs as this user with no sandbox (``plain``)."""
    site = tmp_path / "site"
    site.mkdir()
    for pins in ([Pin("evilpkg", "1.0")], [Pin("tinypkg", "0.5")], [Pin("rt24evil")]):
        with pytest.raises(InstallError, match="No matching distribution found"):
            asyncio.run(run_pip(site, pins, 120, jail=PipJail("plain")))
    assert built(markers) == []


# ------------------------------------------------------------ the jail pip runs in
PROBE = """\
import json, os, sys
out = {"uid": os.getuid(), "env": sorted(os.environ), "cwd": os.getcwd()}
for name, path in (("site", sys.argv[1] + "/w"), ("user", sys.argv[2] + "/w"), ("etc", "/etc/w")):
    try:
        open(path, "w").write("x")
        out[name] = "wrote"
    except OSError as e:
        out[name] = type(e).__name__
os.chmod(sys.argv[1] + "/w", 0o4777)
print(json.dumps(out), file=sys.stderr)
"""


@pytest.mark.skipif(
    pip_jail().mode != "bwrap+uid",
    reason=f"pip runs {pip_jail().describe()} here, not as a leased uid in bubblewrap",
)
def test_pip_runs_as_a_leased_uid_with_only_the_target_writable(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    user.chmod(0o777)  # even a world-writable dir of the user's is out of reach
    site = new_site()
    env = {"OPENAI_API_KEY": SECRET, "GITHUB_TOKEN": "ghp-x", "PATH": os.defpath}
    try:
        status, err = asyncio.run(
            run_jailed([sys.executable, "-I", "-c", PROBE, str(site), str(user)], site, 60, env=env)
        )
        assert status == 0, err
        seen = json.loads(err.decode().strip().splitlines()[-1])
        assert seen["uid"] != 0 and seen["uid"] != os.getuid()
        assert seen["site"] == "wrote" and seen["user"] != "wrote" and seen["etc"] != "wrote"
        assert "OPENAI_API_KEY" not in seen["env"] and "GITHUB_TOKEN" not in seen["env"]
        assert seen["cwd"] != str(Path.cwd())
        # afterwards the site is ours again: root's files, no setuid bit
        st = (site / "w").stat()
        assert (st.st_uid, oct(st.st_mode & 0o7777)) == (os.getuid(), "0o755")
        assert not (user / "w").exists()
    finally:
        import shutil

        shutil.rmtree(site, ignore_errors=True)


# ------------------------------------------------------------ pure parts
@pytest.mark.parametrize(
    "bad",
    [
        "-r/etc/passwd", "--find-links=/tmp", "--index-url=http://x", "-e .", "../x", "x/y",
        "pandas @ file:///etc", "pandas; os.system('id')", "pandas[all]", "pandas>=0",
        "pandas\n--index-url", "ｐａｎｄａｓ", "pandas==", "pandas==v1", "pandas==1.0 --pre",
        "pandas==1-0", "pandas===1.0", "pandas==1.0==2", "rt24evil.tar.gz", "x.whl", "X.ZIP",
        "pandas_", ".pandas", "", "a" * 101, "pandas==" + "1" * 70, 42,
    ],
)  # fmt: skip
def test_install_package_names_are_checked(bad: object) -> None:
    with pytest.raises(InstallError, match="install_package: "):
        parse_request(bad)


def test_good_names_are_canonical_and_versions_normal() -> None:
    assert parse_request(" Foo_Bar ").requirement == "foo-bar"
    assert parse_request("Foo.Bar==1.0.POST1").requirement == "foo-bar==1.0.post1"
    assert parse_request("torch==1!2.0+cpu").requirement == "torch==1!2.0+cpu"
    assert parse_pins({"B": "2", "a_b": "1.0"}) == [Pin("a-b", "1.0"), Pin("b", "2")]
    assert parse_pins(None) == []


@pytest.mark.parametrize(
    "installs",
    [
        {"--find-links=x": "1"}, {"evil": "--pre"}, {"evil": "1 --index-url=x"}, {"x": 1},
        {"x.tar.gz": "1"}, {"A": "1", "a": "2"}, ["evil"], "evil",
        {f"p{i}": "1" for i in range(MAX_PINS + 1)},
    ],
)  # fmt: skip
def test_a_notebooks_installs_are_checked_as_a_whole(installs: object) -> None:
    with pytest.raises(InstallError, match="nb.ipynb"):
        parse_pins(installs, "nb.ipynb")


def test_verify_policies() -> None:
    installs = {"evilpkg": "1.0", "tinypkg": "1.0"}

    def check(policy: str, ask=None) -> list[Pin]:  # noqa: ANN001
        return asyncio.run(check_rerun(installs, InstallPolicy.parse(policy), ask, "nb.ipynb"))

    with pytest.raises(InstallError, match="--install allow:evilpkg,tinypkg or --install any"):
        check("never")
    with pytest.raises(InstallError, match=r"install evilpkg==1.0, which --install allow:t"):
        check("allow:tinypkg")
    assert [p.name for p in check("allow:TinyPkg,EvilPkg")] == ["evilpkg", "tinypkg"]
    assert len(check("any")) == 2
    asked: list[str] = []

    async def ask(text: str) -> bool:
        asked.append(text)
        return False

    with pytest.raises(InstallError, match="declined"):
        check("ask", ask)
    assert asked == ["evilpkg==1.0 tinypkg==1.0"]
    assert asyncio.run(check_rerun({}, InstallPolicy(), None)) == []


def test_pips_command_line_takes_wheels_only_and_no_options_after_dashdash(tmp_path: Path):
    argv = pip_argv(tmp_path, [Pin("a", "1.0"), Pin("b")], no_deps=True)
    assert argv[1:5] == ["-I", "-m", "pip", "install"]
    assert argv[argv.index("--only-binary") + 1] == ":all:"
    assert "--no-deps" in argv and "--no-cache-dir" in argv
    assert argv[argv.index("--") :] == ["--", "a==1.0", "b"]


def test_pips_environment_keeps_the_index_and_drops_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[global]\nindex-url = https://mirror\n")
    base = {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(home),
        "PIP_INDEX_URL": "https://u:p@mirror/simple", "PIP_FIND_LINKS": "/w",
        "HTTPS_PROXY": "http://proxy:3128", "SSL_CERT_FILE": "/etc/ssl/ca.pem",
        "OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": "x", "GITHUB_TOKEN": "x",
        "AWS_SECRET_ACCESS_KEY": "x", "DATABASE_URL": "postgres://u:p@db/x",
        "PIP_NO_BINARY": ":all:", "PIP_REQUIREMENT": "/etc/passwd", "PIP_CONSTRAINT": "/x",
        "PIP_TARGET": "/usr", "PIP_NO_BUILD_ISOLATION": "0", "PYTHONPATH": "/evil",
        "PYTHONSTARTUP": "/evil.py", "LD_PRELOAD": "/evil.so", "VIRTUAL_ENV": "/v",
    }  # fmt: skip
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = pip_environment(scratch, base)
    assert sorted(env) == sorted(
        [
            "PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PIP_INDEX_URL", "PIP_FIND_LINKS",
            "HTTPS_PROXY", "SSL_CERT_FILE", "PIP_NO_INPUT", "PIP_DISABLE_PIP_VERSION_CHECK",
        ]
    )  # fmt: skip
    assert SECRET not in json.dumps(env)
    assert env["HOME"] == str(scratch / "home") and env["TMPDIR"] == str(scratch / "tmp")
    copied = scratch / "home" / ".config" / "pip" / "pip.conf"
    assert copied.read_text() == "[global]\nindex-url = https://mirror\n"


def test_a_wheels_own_metadata_is_recorded_only_when_verify_would_take_it(tmp_path: Path):
    from kernel_agent.tools.installs import installed_versions

    for folder, name, version in (
        ("good-1.0", "Good_Pkg", "1.0"),
        ("evil-1.0", "--find-links=/x", "1.0"),
        ("evil2-1.0", "evil2", "1.0 --pre"),
    ):
        info = tmp_path / f"{folder}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    assert installed_versions(tmp_path) == {"Good_Pkg": "1.0"}
