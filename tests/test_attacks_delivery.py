"""Delivered and declared files are content, never configuration (redteam 2026-11-24 B5, B4, C1).

B5: a kernel wrote ``report/.git/config`` with ``core.fsmonitor``; the copy delivered
beside the notebook was root-owned, so ``git status`` there ran the kernel's command as
root. Now no path with a component that starts with ``.`` leaves the work dir, at any
depth, by delivery or by ``set_result``; and what is left out (dot names, depth) is said.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import run_cell, text

from kernel_agent.edges.delivery import DeliveryLimits, deliver_work_files
from kernel_agent.edges.safefs import copy_out, walk_beneath
from kernel_agent.errors import ToolError, UnsafePath
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.tools.declared import DeclaredResult

pytestmark = pytest.mark.timeout(180)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no bwrap sandbox here: {PROBLEM}")


def plant(marker: Path) -> str:
    """Kernel code: B5's repository, its cousins, a deep tree, and one honest file."""
    return (
        "import os\n"
        "for d in ('report/.git/objects', 'report/.git/refs', 'a/.hg', 'deep/x/y',\n"
        "          'tree/' + '/'.join('d%d' % i for i in range(12))):\n"
        "    os.makedirs(d, exist_ok=True)\n"
        "open('report/.git/HEAD', 'w').write('ref: refs/heads/main\\n')\n"
        "open('report/.git/objects/keep', 'w').write('')\n"
        "open('report/.git/refs/keep', 'w').write('')\n"
        "open('report/.git/config', 'w').write('[core]\\n\\trepositoryformatversion = 0\\n'\n"
        "    '\\tbare = false\\n'\n"
        f"    '\\tfsmonitor = \"sh -c \\'id > {marker}\\' #\"\\n')\n"
        "open('a/.hg/hgrc', 'w').write('[hooks]\\npre-status = id\\n')\n"
        "open('deep/x/y/.envrc', 'w').write('id\\n')\n"
        "open('.envrc', 'w').write('id\\n')\n"
        "open('report/summary.md', 'w').write('# Summary\\n')\n"
        "open('tree/' + '/'.join('d%d' % i for i in range(12)) + '/bottom.txt', 'w').write('b')\n"
        "print('planted')\n"
    )


def test_delivery_leaves_out_every_dot_name_and_says_what_it_left(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    subprocess.run([sys.executable, "-c", plant(tmp_path / "marker")], cwd=work, check=True)
    nb = tmp_path / "out" / "run.ipynb"
    nb.parent.mkdir()
    delivered, notes = deliver_work_files(work, nb, DeliveryLimits(max_depth=6))
    folder = nb.parent / "run_files" / "work"
    assert [p.relative_to(folder).as_posix() for p in delivered] == ["report/summary.md"]
    copied = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
    assert not [name for name in copied if "/." in f"/{name}"]  # nothing dot-named, anywhere
    assert notes[0] == (
        "4 dot-named path(s), configuration rather than content: .envrc, a/.hg, "
        "report/.git and 1 more"
    )
    assert notes[1] == "what is below 6 directory levels: tree/d0/d1/d2/d3/d4"


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


@needs_bwrap
def test_b5_a_run_delivers_no_repository_and_git_runs_nothing(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    marker = tmp_path / "git-fsmonitor-ran"
    refused = (
        "for files in (['report/.git/config'], ['a/.hg/hgrc'], ['.envrc']):\n"
        "    try:\n"
        "        set_result(1, files=files); print('ACCEPTED', files)\n"
        "    except ToolError as e:\n"
        "        print(e)\n"
    )
    fake_llm.enqueue(run_cell(plant(marker) + refused), text("done"))
    (tmp_path / ".git").mkdir()  # the user's own: linked into the work dir, never news
    (tmp_path / ".env").write_text("USER_SETTING=1\n")
    nb = tmp_path / "notebooks" / "run.ipynb"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "run", "--base-url", fake_llm.base_url,
         "--model", "t", "--sandbox", "bwrap", "--format", "plain", "--notebook", str(nb), "go"],
        capture_output=True, text=True, env={**env, "KERNEL_AGENT_LEVERS": "none"},
        cwd=tmp_path, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    work = nb.parent / "run_files" / "work"
    copied = sorted(p.relative_to(work).as_posix() for p in work.rglob("*"))
    assert [name for name in copied if (work / name).is_file()] == ["report/summary.md"]
    assert not [name for name in copied if "/." in f"/{name}"]
    # the notice names what was left out, and why
    assert "4 dot-named path(s), configuration rather than content" in proc.stderr
    assert "what is below 8 directory levels: tree/d0/d1/d2/d3/d4/d5/d6" in proc.stderr
    import nbformat

    outputs = "".join(
        o.get("text", "")
        for c in nbformat.read(nb, as_version=4).cells
        for o in c.get("outputs", [])
    )
    assert "ACCEPTED" not in outputs and outputs.count("is a dot name") == 3
    if shutil.which("git"):
        subprocess.run(["git", "status"], cwd=work / "report", capture_output=True, timeout=30)
    assert not marker.exists()
