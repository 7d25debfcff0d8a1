"""Files the kernel writes come back beside the notebook: regular files only, no links, no setuid."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import run_cell, text

from kernel_agent.edges.delivery import DeliveryLimits, deliver_work_files

pytestmark = pytest.mark.timeout(120)


def test_only_the_kernels_own_regular_files_are_delivered(tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "sub").mkdir(parents=True)
    (work / "out.csv").write_text("a,b\n")
    (work / "sub" / "plot.png").write_bytes(b"png")
    (work / "suid").write_bytes(b"x")
    (work / "suid").chmod(0o4755)
    (work / "big.bin").write_bytes(b"0" * 2000)
    (work / "link").symlink_to("/etc/passwd")
    (work / "sublink").symlink_to(tmp_path)
    nb = tmp_path / "out" / "run.ipynb"
    nb.parent.mkdir()
    delivered, skipped = deliver_work_files(work, nb, DeliveryLimits(max_file_bytes=1000))
    folder = nb.parent / "run_files" / "work"
    assert sorted(p.relative_to(folder).as_posix() for p in delivered) == [
        "out.csv",
        "sub/plot.png",
        "suid",
    ]
    assert not stat.S_IMODE((folder / "suid").stat().st_mode) & stat.S_ISUID
    assert not (folder / "link").exists() and any("big.bin" in s for s in skipped)
    again, _ = deliver_work_files(work, nb, DeliveryLimits(max_file_bytes=1000))
    assert again == []  # unchanged files are not copied twice


def test_a_run_delivers_what_the_kernel_wrote(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    fake_llm.enqueue(
        run_cell("open('result.csv', 'w').write('x,y\\n1,2\\n')"), text("wrote result.csv")
    )
    nb = tmp_path / "nb" / "r.ipynb"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "run", "--base-url", fake_llm.base_url, "--model", "t",
         "--format", "json", "--notebook", str(nb), "go"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=100,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["files"] == [str(nb.parent / "r_files" / "work" / "result.csv")]
    assert Path(data["files"][0]).read_text() == "x,y\n1,2\n"
    assert not (tmp_path / "result.csv").exists()  # the user's dir was never written
