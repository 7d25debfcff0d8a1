"""Delivered and declared files are content, never configuration (redteam 2026-11-27 D1–D5).

D1–D3: a kernel wrote a dot-free bare git repository (``report/{HEAD,config,objects,refs}``,
``core.worktree`` and ``core.fsmonitor``); the copy delivered beside the notebook was
root-owned, so root's ``git status`` in ``report/sub`` ran the kernel's command. D4/D5: a
delivered ``conftest.py`` ran under root's ``pytest``, and an unchecked-hash ``__pycache__``
pyc ran other code than the source shown on ``import helper``.

Fixed by construction, not by name: everything the kernel wrote comes back inside one archive
(``<notebook>_files/work.zip``), and only ``set_result``'s inert data files come back loose,
flat. The property test runs root's git, pytest and Python in every delivered directory, after
a real sandboxed run, and shows that no payload ran; the same archive laid out as a tree (what
delivery used to leave) runs them, so the test can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fake_openai import run_cell, text
from payloads import DECLARED, LIVE_AS_TREE, LOOSE, delivered_dirs, extract_control, plant, probe

from kernel_agent.edges.delivery import DeliveryLimits, deliver
from kernel_agent.edges.safefs import copy_out, walk_beneath
from kernel_agent.errors import ToolError, UnsafePath
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.tools.declared import DeclaredResult

pytestmark = pytest.mark.timeout(300)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no bwrap sandbox here: {PROBLEM}")


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


@needs_bwrap
@pytest.mark.parametrize("declare", [False, True], ids=["work-dir", "set-result"])
def test_no_delivered_tree_runs_anything_under_git_pytest_or_python(
    fake_llm,  # noqa: ANN001
    tmp_path: Path,
    declare: bool,
) -> None:
    mark = tmp_path / "markers"
    mark.mkdir()
    code = plant(mark) + (f"set_result({{'ok': 1}}, files={DECLARED!r})\n" if declare else "")
    fake_llm.enqueue(run_cell(code), text("done"))
    view, project = tmp_path / "view", tmp_path / "proj"
    view.mkdir()
    nb = project / "notebooks" / "run.ipynb"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "run", "--base-url", fake_llm.base_url,
         "--model", "t", "--sandbox", "bwrap", "--format", "plain", "--notebook", str(nb),
         *(["--result"] if declare else []), "go"],
        capture_output=True, text=True, env={**env, "KERNEL_AGENT_LEVERS": "none"},
        cwd=view, timeout=200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    files = delivered_dirs(nb)
    archive = files / "work.zip"
    loose = ["result", *(f"result/{name}" for name in LOOSE)] if declare else []
    assert tree(files) == sorted(["work.zip", *loose])
    assert f"are in the archive {archive}" in proc.stderr  # the CLI says where they are
    if declare:
        assert "18 declared file(s) are not plain data files and stay only in work.zip" in (
            proc.stderr
        )
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
    assert {"report/config", "conftest.py", "__pycache__/helper.cpython-311.pyc"} <= names
    # root's tools in every directory of the project, the delivered ones included: nothing ran
    assert probe(project, mark, project=project) == set()
    assert os.listdir(mark) == []
    # the control: the same files laid out as a tree, as delivery used to leave them, run
    control = extract_control(archive, tmp_path / "control")
    assert LIVE_AS_TREE <= probe(control, mark, project=control)


def test_the_archive_leaves_out_dot_names_and_says_what_it_left(tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "report" / ".git").mkdir(parents=True)
    (work / "report" / ".git" / "config").write_text("[core]\n")
    (work / "a" / ".hg").mkdir(parents=True)
    (work / ".envrc").write_text("id\n")
    (work / "report" / "summary.md").write_text("# Summary\n")
    deep = work / "tree" / "/".join(f"d{i}" for i in range(12))
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("b")
    nb = tmp_path / "out" / "run.ipynb"
    nb.parent.mkdir()
    found = deliver(work, nb, limits=DeliveryLimits(max_depth=6))
    assert found.members == ["report/summary.md"]
    assert found.notes[0] == (
        "3 dot-named path(s), hidden state rather than results: .envrc, a/.hg, report/.git"
    )
    assert found.notes[1] == "what is below 6 directory levels: tree/d0/d1/d2/d3/d4"
    assert tree(nb.parent) == ["run_files", "run_files/work.zip"]


def test_a_walk_names_what_it_did_not_enter(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "f").write_text("x")
    (tmp_path / "a" / "empty").mkdir()
    (tmp_path / ".hidden").write_text("x")
    (tmp_path / ".git").symlink_to(tmp_path / "a")  # the user's own, linked into a work dir
    walk = walk_beneath(tmp_path, max_depth=2, skip_dot=True)
    assert [e.path for e in walk.entries] == ["a", "a/b", "a/empty"]
    assert walk.too_deep == ["a/b"]  # a/empty holds nothing: nothing was left out there
    assert (walk.dot_count, walk.dot_names, walk.truncated) == (1, [".hidden"], False)
    full = walk_beneath(tmp_path, max_entries=2)
    assert full.truncated and len(full.entries) == 2
    assert ".hidden" in [e.path for e in walk_beneath(tmp_path).entries]  # only when asked


def test_copy_out_refuses_a_dot_component_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "x" / ".git").mkdir(parents=True)
    (tmp_path / "x" / ".git" / "config").write_text("[core]\n")
    with pytest.raises(UnsafePath, match=r"\.git is a dot name"):
        copy_out(tmp_path, "x/.git/config", tmp_path / "dest", limit=100)
    assert not (tmp_path / "dest").exists()


def test_set_result_refuses_a_dot_component(tmp_path: Path) -> None:
    (tmp_path / "x" / ".git").mkdir(parents=True)
    (tmp_path / "x" / ".git" / "config").write_text("[core]\n")
    (tmp_path / ".envrc").write_text("id\n")
    (tmp_path / "x" / "ok.txt").write_text("ok")
    declared = DeclaredResult()
    for name in ("x/.git/config", ".envrc", "./x/../.envrc"):
        with pytest.raises(ToolError, match="refused"):
            declared.declare(None, [name], tmp_path)
    assert declared.declare(1, ["./x/ok.txt"], tmp_path)["files"] == ["x/ok.txt"]
