"""What the kernel writes comes back as content: one archive, and declared data files loose."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fake_openai import run_cell, text

from kernel_agent.edges.delivery import DATA_SUFFIXES, DeliveryLimits, deliver, loose_name

pytestmark = pytest.mark.timeout(120)


def test_the_kernels_own_regular_files_come_back_in_one_archive(tmp_path: Path) -> None:
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
    found = deliver(work, nb, limits=DeliveryLimits(max_file_bytes=1000))
    assert found.archive == nb.parent / "run_files" / "work.zip" and found.changed
    assert sorted(found.members) == ["out.csv", "sub/plot.png", "suid"]
    assert sorted(p.name for p in (nb.parent / "run_files").iterdir()) == ["work.zip"]
    with zipfile.ZipFile(found.archive) as zf:
        assert zf.read("sub/plot.png") == b"png"
        assert {i.external_attr >> 16 for i in zf.infolist()} == {0o100644}  # no setuid
    assert any("big.bin" in s for s in found.notes) and found.loose == []
    assert "3 file(s) the kernel wrote are in the archive" in (found.notice() or "")
    again = deliver(work, nb, limits=DeliveryLimits(max_file_bytes=1000))
    assert not again.changed and again.members == found.members  # unchanged: kept as it was


@pytest.mark.parametrize(
    "name",
    ["out/table.csv", "plot.PNG", "report.pdf", "a.b.parquet", "données.tsv", "page.html"],
)
def test_declared_data_files_come_back_flat(name: str) -> None:
    assert loose_name(name) == name.rsplit("/", 1)[-1]


@pytest.mark.parametrize(
    "name",
    [
        "conftest.py", "helper.pyc", "mod.so", "x.cpython-311-x86_64-linux-gnu.so", "a.pth",
        "sitecustomize.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
        "package.json", "r/HEAD", "r/config", "Makefile", ".envrc", ".csv", "-rf.csv",
        "model.pkl", "book.xlsm", "a\nb.csv", "x.json", "ci.yml", "pom.xml", "work.zip",
        "__init__.py", "data", "AGENTS.md", "CLAUDE.md", "CMakeLists.txt", "requirements.txt",
    ],
)  # fmt: skip
def test_anything_else_declared_stays_in_the_archive(name: str) -> None:
    assert loose_name(name) is None


def test_no_data_suffix_is_one_python_imports() -> None:
    importable = {s.rsplit(".", 1)[-1] for s in importlib.machinery.all_suffixes()}
    assert importable and not DATA_SUFFIXES & importable


def test_declared_files_land_flat_and_the_rest_is_named(tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "out").mkdir(parents=True)
    (work / "out" / "table.csv").write_text("n\n1\n")
    (work / "table.csv").write_text("other\n")  # the same flat name: stays in the archive
    (work / "conftest.py").write_text("raise SystemExit\n")
    nb = tmp_path / "run.ipynb"
    declared = ["out/table.csv", "table.csv", "conftest.py"]
    found = deliver(work, nb, declared=declared)
    assert found.loose == [tmp_path / "run_files" / "result" / "table.csv"]
    assert found.loose[0].read_text() == "n\n1\n"
    assert found.notes == [
        "2 declared file(s) are not plain data files and stay only in work.zip: "
        "table.csv, conftest.py"
    ]
    assert found.archive is not None and "conftest.py" in found.members
    # an unsandboxed kernel wrote in the user's own dir: no archive, the data file loose
    bare = deliver(work, tmp_path / "b.ipynb", declared=["out/table.csv"], archive=False)
    assert bare.archive is None and [p.name for p in bare.loose] == ["table.csv"]


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
    archive = nb.parent / "r_files" / "work.zip"
    assert data["files"] == [str(archive)]
    assert f"are in the archive {archive}" in proc.stderr  # the CLI says where they are
    with zipfile.ZipFile(archive) as zf:
        assert zf.read("result.csv") == b"x,y\n1,2\n"
    assert not (tmp_path / "result.csv").exists()  # the user's dir was never written
