"""The unprivileged worker: as root it really is another uid, holding no power worth stealing.

``python -m code`` (the standard library's console, reading its statements from stdin)
stands in for any worker module: what it prints is what a worker could do.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_agent.errors import SandboxError
from kernel_agent.sandbox.unprivileged import run_module

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch happens only as root"),
]
SECRET = "ROOT-ONLY-WORKER-SECRET"


def console(code: str, **kw: object) -> str:
    """Run ``code`` line by line in a worker; what it printed."""
    out = run_module("code", [], (code.strip() + "\n").encode(), **kw)  # type: ignore[arg-type]
    return out.decode().replace(">>> ", "").replace("... ", "")


@pytest.fixture
def secrets() -> Iterator[Path]:
    """A 0600 root file in a world-readable dir, a 0644 one in a 0700 dir, and a 0644 one
    every user may read (the control: the worker sees the dir). Beside this file, not in
    /tmp: the worker's /tmp is its own."""
    base = Path(tempfile.mkdtemp(prefix="ka-worker-", dir=Path(__file__).parent))
    base.chmod(0o755)
    (base / "public").write_text("PUBLIC")
    (base / "public").chmod(0o644)
    (base / "mine").write_text(SECRET)
    (base / "mine").chmod(0o600)
    private = base / "private"
    private.mkdir(mode=0o700)
    (private / "open").write_text(SECRET)
    (private / "open").chmod(0o644)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_the_worker_is_a_non_root_uid_that_cannot_read_root_files(secrets: Path) -> None:
    code = f"""
import os
print("ids", os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
for p in ({str(secrets / "mine")!r}, {str(secrets / "private" / "open")!r}, "/etc/shadow",
          {str(secrets / "public")!r}):
    try: print("read", open(p).read())
    except OSError as e: print("refused", e.errno)

print("status", [l for l in open("/proc/self/status") if l.startswith(("CapEff", "NoNewPrivs"))])
print("env", sorted(os.environ))
"""
    out = console(code)
    ids = next(line.split() for line in out.splitlines() if line.startswith("ids"))
    assert ids[1] != "0" and ids[1] == ids[2] == ids[3] and ids[4] == "[]"
    assert SECRET not in out and "read PUBLIC" in out
    # EACCES for the two planted files (seen, and refused to its uid); /etc/shadow is
    # refused too, or not there at all where bwrap binds only the system's named files
    assert out.count("refused 13") == 2 and out.count("refused 13") + out.count("refused 2") == 3
    assert "CapEff:\\t0000000000000000" in out and "NoNewPrivs:\\t1" in out
    assert not any(k in out for k in ("OPENAI", "KEY", "TOKEN"))


def test_the_worker_has_its_rlimits_and_an_empty_bounded_home() -> None:
    out = console(
        """
import os, resource
print("as", resource.getrlimit(resource.RLIMIT_AS)[0] >> 30, "nproc", resource.getrlimit(resource.RLIMIT_NPROC)[0])
print("cwd", os.listdir("."), os.access(".", os.W_OK), os.environ["HOME"] == os.getcwd())
try:
    with open("fill", "wb") as fh:
        for _ in range(400): fh.write(b"x" * (1 << 20))
    print("filled")
except OSError as e: print("full", e.errno)

print("end")
"""
    )
    assert "as 6 nproc 64" in out and "cwd [] True True" in out
    from kernel_agent.sandbox import bwrap_problem

    if bwrap_problem()[0] is None:  # its home is a tmpfs of TMPFS_MB: 400 MB do not fit
        assert "full 28" in out
    else:  # a directory of the host's /tmp: the file-size rlimit (512 MB) holds
        assert "filled" in out


def test_the_worker_is_bounded_in_output_and_time() -> None:
    with pytest.raises(SandboxError, match="more than"):
        console("import sys\nsys.stdout.write('x' * 5_000_000)", max_output=1_000_000)
    with pytest.raises(SandboxError, match="longer than"):
        console("import time\ntime.sleep(60)", timeout=3)


def test_without_bwrap_it_still_drops_or_refuses_never_runs_as_root(
    secrets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where bwrap does not work, the worker runs through setpriv alone if every user may
    run the interpreter, and refuses with one line if not: it never falls back to root."""
    from kernel_agent.sandbox import bwrap, unprivileged

    monkeypatch.setattr(bwrap, "bwrap_problem", lambda *a: ("bwrap does not work here", None, None))
    code = f"import os\nprint('uid', os.geteuid())\nprint(open({str(secrets / 'mine')!r}).read())"
    if unprivileged._everyone_may_run(Path(sys.executable)):
        out = console(code)
        assert "uid 0" not in out and SECRET not in out and "uid " in out
    else:
        with pytest.raises(SandboxError, match="cannot run unprivileged") as caught:
            console(code)
        assert "\n" not in str(caught.value) and sys.executable in str(caught.value)
