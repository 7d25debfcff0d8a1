"""The clean notebook works with other tools: ``pytest --nbval`` and papermill."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbfactory import PLOT_STEPS, build_transcript

from kernel_agent.notebook.clean import write_pair

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def clean_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("interop")
    transcript = build_transcript(root / "run.ipynb", PLOT_STEPS)
    return write_pair(transcript, root / "run.ipynb", root / "run.clean.ipynb")[1]


def run_nbval(notebook, cwd):
    """``pytest --nbval NOTEBOOK`` in a separate process, away from our pytest config."""
    (cwd / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-q", str(notebook)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def test_clean_notebook_passes_nbval(clean_path, tmp_path):
    shutil.copy(clean_path, tmp_path / "nb.ipynb")
    proc = run_nbval(tmp_path / "nb.ipynb", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "4 passed" in proc.stdout


def test_nbval_catches_an_edited_output(clean_path, tmp_path):
    nb = nbformat.read(clean_path, as_version=4)
    [c for c in nb.cells if c.cell_type == "code"][1].outputs[0]["text"] = "31\n"
    nbformat.write(nb, tmp_path / "nb.ipynb")
    proc = run_nbval(tmp_path / "nb.ipynb", tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "1 failed, 3 passed" in proc.stdout


def test_clean_notebook_runs_under_papermill(clean_path, tmp_path):
    import papermill

    out = tmp_path / "papermill.ipynb"
    papermill.execute_notebook(
        str(clean_path), str(out), kernel_name="python3", progress_bar=False, cwd=str(tmp_path)
    )
    nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not nb.metadata.papermill["exception"]
    assert code[1].outputs[0]["text"] == "30\n"
    assert any("image/png" in o.get("data", {}) for o in code[2].outputs)
