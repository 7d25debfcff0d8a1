"""Transcript: valid nbformat, byte-identical to nbformat.writes, atomic, crash-safe."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import PINNED_KERNEL_ENV
from nbclient import NotebookClient
from nbformat import NotebookNode

import kernel_agent
from kernel_agent.errors import NotebookError
from kernel_agent.notebook.transcript import Transcript, write_notebook_atomic
from kernel_agent.results import CellResult

pytestmark = pytest.mark.timeout(120)

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LANGUAGE_INFO = {"name": "python", "version": "3.11", "file_extension": ".py"}


def result(code: str, *outputs: NotebookNode, count: int | None = 1) -> CellResult:
    now = datetime.now(timezone.utc)
    return CellResult(code, "ok", count, list(outputs), None, now, now)


def stdout(text: str) -> NotebookNode:
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def others(directory: Path, keep: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p != keep)


def without_counts(outputs: list[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in o.items() if k != "execution_count"} for o in outputs]


def run_cells(kernel: Any, transcript: Transcript, cells: list[str]) -> None:
    for code in cells:
        transcript.add_code(code, kernel.execute(code, timeout=60), {"step": 1})


# ------------------------------------------------------------------ format
def test_real_run_gives_valid_nbformat_45_with_ids(kernel: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.ipynb"
    t = Transcript(path, kernelspec=kernel.kernelspec, language_info=kernel.language_info)
    t.add_markdown("# Task\nPlot something.", {"role": "task"})
    run_cells(
        kernel,
        t,
        [
            "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()",
            "print('héllo ✓ 日本')",
            "1 / 0",
            "from IPython.display import HTML\nHTML('<b>x</b>')",
        ],
    )
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)
    assert all(cell.get("id") for cell in nb.cells)
    assert len({cell.id for cell in nb.cells}) == len(nb.cells)
    assert nb.metadata.kernelspec == kernel.kernelspec
    assert nb.metadata.language_info.name == "python"
    assert nb.metadata.language_info.version == kernel.language_info["version"]
    assert [c.cell_type for c in nb.cells] == ["markdown"] + ["code"] * 4
    assert nb.cells[0].metadata.kernel_agent == {"role": "task"}
    assert nb.cells[1].outputs[0].data["image/png"].startswith("iVBOR")
    assert nb.cells[2].outputs[0].text == "héllo ✓ 日本\n"
    assert nb.cells[3].outputs[0].ename == "ZeroDivisionError"
    assert nb.cells[4].execution_count == nb.cells[1].execution_count + 3
    t.validate()


def test_bytes_match_nbformat_writes(kernel: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.ipynb"
    t = Transcript(path, kernelspec=kernel.kernelspec, language_info=kernel.language_info)
    assert not path.exists()  # nothing is written before the first cell or save
    t.save()
    assert path.read_text(encoding="utf-8") == nbformat.writes(t.nb)  # no cells yet
    t.add_markdown("multi\nline ✓")
    run_cells(
        kernel, t, ["x = 'a\\nb'\nprint(x)", "{'k': [1, 2]}", "import sys; sys.stderr.write('e')"]
    )
    t.cells[-1].metadata["trusted"] = True  # dropped by nbformat.writes, and by us
    t.save()
    assert path.read_text(encoding="utf-8") == nbformat.writes(t.nb)
    t.freeze_all()
    run_cells(kernel, t, ["x"])
    t.update_run_metadata(task="t", answer="ok")
    assert path.read_text(encoding="utf-8") == nbformat.writes(t.nb)
    assert t.render() == nbformat.writes(t.nb)  # the frozen cache renders the same text


def test_display_update_reaches_a_frozen_cell(kernel: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.ipynb"
    t = Transcript(path, kernelspec=kernel.kernelspec, language_info=kernel.language_info)
    for code in ["h = display('first', display_id=True)", "x = 1", "h.update('second')"]:
        t.add_code(code, kernel.execute(code))
        t.freeze_all()  # after every cell, as a run does
    assert nbformat.read(path, as_version=4).cells[0].outputs[0].data == {"text/plain": "'second'"}
    assert path.read_text(encoding="utf-8") == nbformat.writes(t.nb)


def test_cell_without_result_and_run_metadata(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    t = Transcript(path, metadata={"model": "m"})
    cell = t.add_code("planned()")
    assert cell.outputs == [] and cell.execution_count is None
    t.update_run_metadata(steps=1)
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.kernel_agent == {"model": "m", "steps": 1}
    assert "kernelspec" not in nb.metadata  # none known yet
    nbformat.validate(nb)


# ------------------------------------------------------------------ atomic
def test_saves_leave_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    t = Transcript(path, kernelspec=KERNELSPEC, language_info=LANGUAGE_INFO)
    for i in range(5):
        t.add_code(f"print({i})", result(f"print({i})", stdout(f"{i}\n"), count=i + 1))
    assert others(tmp_path, path) == []
    assert len(nbformat.read(path, as_version=4).cells) == 5


def test_failed_write_keeps_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nb.ipynb"
    t = Transcript(path, kernelspec=KERNELSPEC, language_info=LANGUAGE_INFO)
    t.add_code("a = 1", result("a = 1"))
    before = path.read_bytes()

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(NotebookError, match="No space left on device") as info:
        t.add_code("b = 2", result("b = 2"))
    assert "\n" not in str(info.value)
    assert path.read_bytes() == before
    assert others(tmp_path, path) == []


@pytest.mark.parametrize("where", ["under_a_file", "is_a_directory"])
def test_unwritable_path_is_a_one_line_notebook_error(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "blocker"
    if where == "under_a_file":
        blocker.write_text("not a directory")
        path = blocker / "nb.ipynb"
    else:
        blocker.mkdir()
        path = blocker
    t = Transcript(path)
    with pytest.raises(NotebookError, match="cannot write notebook") as info:
        t.add_markdown("x")
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(NotebookError):
        write_notebook_atomic(nbformat.v4.new_notebook(), path)


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import datetime, timezone
    import nbformat
    from kernel_agent.results import CellResult
    from kernel_agent.notebook.transcript import Transcript

    spec = {"name": "python3", "display_name": "P", "language": "python"}
    t = Transcript(sys.argv[1], kernelspec=spec)
    for i in range(3):
        now = datetime.now(timezone.utc)
        out = nbformat.v4.new_output("stream", name="stdout", text=f"{i}\\n")
        t.add_code(f"print({i})", CellResult(f"print({i})", "ok", i + 1, [out], None, now, now))
        t.freeze_all()
    # die hard half-way through the fourth save: temp file written, not yet moved into place
    os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    t.add_code("print(3)")
    """
)


def test_crash_mid_run_leaves_a_valid_notebook(tmp_path: Path) -> None:
    path = tmp_path / "crash.ipynb"
    env = {**os.environ, "PYTHONPATH": str(Path(kernel_agent.__file__).parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(path)], env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == -9, proc.stderr.decode()
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells] == ["print(0)", "print(1)", "print(2)"]
    assert [c.outputs[0].text for c in nb.cells] == ["0\n", "1\n", "2\n"]
    # the interrupted save leaves at most its own temporary file behind
    assert all(name.startswith(".crash.ipynb.") for name in others(tmp_path, path))


# -------------------------------------------------------------------- load
def test_load_and_append(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    first = Transcript(
        path, kernelspec=KERNELSPEC, language_info=LANGUAGE_INFO, metadata={"run": 1}
    )
    first.add_markdown("intro")
    first.add_code("a = 1", result("a = 1"))
    again = Transcript.load(path)
    assert [c.source for c in again.cells] == ["intro", "a = 1"]
    assert again.run_metadata == {"run": 1}
    again.add_code("a + 1", result("a + 1", count=2))
    nb = nbformat.read(path, as_version=4)
    assert [c.source for c in nb.cells] == ["intro", "a = 1", "a + 1"]
    assert nb.metadata.kernelspec == KERNELSPEC
    assert path.read_text(encoding="utf-8") == nbformat.writes(again.nb)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read notebook"),
        ("not json at all", "not a valid notebook"),
        ("{}", "not a valid notebook"),
        (
            '{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
            "not a valid notebook",
        ),
    ],
    ids=["missing", "not_json", "empty_object", "bad_cells"],
)
def test_load_bad_files(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "bad.ipynb"
    if content is not None:
        path.write_text(content)
    with pytest.raises(NotebookError, match=message) as info:
        Transcript.load(path)
    assert "\n" not in str(info.value)


def test_validate_reports_an_invalid_notebook(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "nb.ipynb", autosave=False)
    t.add_code(
        "x", result("x", NotebookNode(output_type="stream", name="stdout", text="", bogus=1))
    )
    with pytest.raises(NotebookError, match="invalid notebook"):
        t.validate()


# -------------------------------------------------------------- re-execution
def test_transcript_reexecutes_with_nbclient(
    kernel: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.ipynb"
    t = Transcript(path, kernelspec=kernel.kernelspec, language_info=kernel.language_info)
    t.add_markdown("compute")
    cells = ["x = 2", "print(x * 21)", "import math\nmath.sqrt(x * 8)"]
    run_cells(kernel, t, cells)
    for name, value in PINNED_KERNEL_ENV.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=60, resources={"metadata": {"path": str(tmp_path)}}).execute()
    stored = nbformat.read(path, as_version=4)
    for fresh, old in zip(nb.cells[1:], stored.cells[1:], strict=True):
        assert without_counts(fresh.outputs) == without_counts(old.outputs)
    assert nb.cells[2].outputs[0].text == "42\n"


def test_saved_notebooks_get_the_usual_file_mode(tmp_path):
    """mkstemp's 0600 must not leak: a new notebook gets 0666 less the umask, an old one keeps its mode."""
    umask = os.umask(0o022)
    os.umask(umask)
    t = Transcript(tmp_path / "mode.ipynb")
    t.add_markdown("hi")
    assert (tmp_path / "mode.ipynb").stat().st_mode & 0o777 == 0o666 & ~umask
    (tmp_path / "mode.ipynb").chmod(0o640)
    t.add_markdown("again")
    assert (tmp_path / "mode.ipynb").stat().st_mode & 0o777 == 0o640
