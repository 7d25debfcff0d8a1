"""verify.py: re-execution in a fresh real kernel, compared with what is stored."""

from __future__ import annotations

import os
import shutil

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbfactory import PLOT_STEPS, Step, build_transcript, edit_png

from kernel_agent.errors import KernelNotFound, NotebookError, VerifyMismatch
from kernel_agent.notebook.clean import write_pair
from kernel_agent.notebook.compare import ImageTolerance
from kernel_agent.notebook.verify import record_verdict, verify_notebook

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(transcript path, clean path) of the deterministic plot task."""
    root = tmp_path_factory.mktemp("verify")
    transcript = build_transcript(root / "run.ipynb", PLOT_STEPS)
    return write_pair(transcript, root / "run.ipynb", root / "run.clean.ipynb")


@pytest.fixture
def clean_copy(pair, tmp_path):
    target = tmp_path / "nb.ipynb"
    shutil.copy(pair[1], target)
    return target


def _edit(path, edit):
    nb = nbformat.read(path, as_version=4)
    edit(nb)
    nbformat.write(nb, path)


def _png_cell(nb):
    return next(
        (i, out)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for out in c.outputs
        if "image/png" in out.get("data", {})
    )


def test_clean_notebook_reproduces(pair):
    report = verify_notebook(pair[1])
    assert report.verdict == "reproduced", report.summary()
    assert report.reproduced and report.first_difference is None
    assert [c.status for c in report.cells] == ["same"] * 4
    assert report.kernel_name == "python3"
    assert all(c.seconds is not None and c.original_seconds is not None for c in report.cells)
    assert report.original_s == pytest.approx(sum(c.original_seconds for c in report.cells))
    assert report.startup_s > 0 and report.total_s >= report.execute_s
    report.raise_for_mismatch()  # does not raise
    assert report.to_metadata()["verdict"] == "reproduced"


def test_stored_errors_reproduce_too(pair):
    """The full transcript keeps its failed attempt: the SyntaxError comes back the same."""
    report = verify_notebook(pair[0])
    assert report.verdict == "reproduced", report.summary()
    assert [c.status for c in report.cells] == ["same"] * 5
    stored = nbformat.read(pair[0], as_version=4)
    assert stored.cells[report.cells[1].index].outputs[0]["ename"] == "SyntaxError"


def test_edited_output_is_the_first_difference(clean_copy):
    def edit(nb):
        cell = [c for c in nb.cells if c.cell_type == "code"][1]
        cell.outputs[0]["text"] = "31\n"

    _edit(clean_copy, edit)
    report = verify_notebook(clean_copy)
    assert report.verdict == "differs"
    first = report.first_difference
    assert first is not None and first.number == 2 and first.execution_count == 2
    assert first.problems == ["stdout differs"]
    assert "-31" in first.diff and "+30" in first.diff
    assert [c.status for c in report.cells] == ["same", "differs", "same", "same"]
    with pytest.raises(VerifyMismatch, match="code cell 2 .* stdout differs"):
        report.raise_for_mismatch()


def test_state_from_a_dropped_cell_is_caught(tmp_path):
    """A cell that only worked thanks to a failed attempt's side effect."""
    steps = [Step("a = 5\nraise ValueError('half done')"), Step("print(a)")]
    transcript = build_transcript(tmp_path / "t.ipynb", steps, answer=None)
    _, clean = write_pair(transcript, tmp_path / "t.ipynb", tmp_path / "t.clean.ipynb")
    report = verify_notebook(clean)
    assert report.verdict == "differs"
    assert report.first_difference.problems[:2] == [
        "stdout differs",
        "0 rich outputs stored, 1 after re-execution",
    ]
    assert "+[error] NameError: name 'a' is not defined" in report.first_difference.diff


def test_random_addresses_do_not_count(tmp_path):
    steps = [
        Step("class Thing: pass\nThing()"),
        Step("import uuid, datetime\nprint(uuid.uuid4(), datetime.datetime.now().isoformat())"),
        Step("print(object(), id)"),
    ]
    transcript = build_transcript(tmp_path / "t.ipynb", steps, answer=None)
    stored = transcript.nb.cells[1].outputs[0]["data"]["text/plain"]
    assert "0x" in stored, stored
    report = verify_notebook(transcript.path)
    assert report.verdict == "reproduced", report.summary()


def test_plot_is_compared_by_pixels_with_tolerance(clean_copy):
    def speck(nb):
        _, out = _png_cell(nb)
        out["data"]["image/png"] = edit_png(
            out["data"]["image/png"], (300, 200, 303, 203), (0, 255, 0)
        )

    _edit(clean_copy, speck)
    assert verify_notebook(clean_copy).reproduced, (
        "16 green pixels are within the default tolerance"
    )
    exact = verify_notebook(clean_copy, image_tolerance=ImageTolerance.exact())
    assert exact.verdict == "differs"
    assert "image/png" in exact.first_difference.problems[0]
    assert verify_notebook(clean_copy, image_tolerance=0.0).verdict == "differs"

    def blotch(nb):
        _, out = _png_cell(nb)
        out["data"]["image/png"] = edit_png(out["data"]["image/png"], (0, 0, 200, 200), (0, 0, 0))

    _edit(clean_copy, blotch)
    report = verify_notebook(clean_copy, image_tolerance=0.05)
    assert report.verdict == "differs"
    assert report.first_difference.number == 3


def test_write_saves_the_reexecuted_notebook(clean_copy, tmp_path):
    out = tmp_path / "sub" / "again.ipynb"
    report = verify_notebook(clean_copy, write=out)
    assert report.written == out
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernel_agent["verify"]["verdict"] == "reproduced"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3, 4]
    assert code[1].outputs[0]["text"] == "30\n"
    assert "execution" in code[0].metadata, "nbclient timing is recorded"


def test_record_verdict(clean_copy):
    record_verdict(clean_copy, verify_notebook(clean_copy))
    meta = nbformat.read(clean_copy, as_version=4).metadata.kernel_agent["verify"]
    assert meta["verdict"] == "reproduced" and meta["code_cells"] == meta["reproduced_cells"] == 4


def test_timeout_stops_the_run(tmp_path):
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        }
    )
    nb.cells = [nbformat.v4.new_code_cell(s) for s in ("import time\ntime.sleep(30)", "print(1)")]
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    report = verify_notebook(path, timeout=1)
    assert report.verdict == "error"
    assert [c.status for c in report.cells] == ["error", "not_run"]
    assert report.error == "code cell 1 (In [ ]) timed out after 1 s"
    assert report.total_s < 20


def test_kernel_choice_and_missing_kernels(clean_copy):
    _edit(clean_copy, lambda nb: nb.metadata.kernelspec.update(name="no-such-kernel"))
    with pytest.raises(KernelNotFound, match="no Jupyter kernel named 'no-such-kernel'"):
        verify_notebook(clean_copy)
    assert verify_notebook(clean_copy, kernel_name="python3").reproduced
    _edit(clean_copy, lambda nb: nb.metadata.pop("kernelspec"))
    with pytest.raises(KernelNotFound, match="names no kernel"):
        verify_notebook(clean_copy)


def test_unreadable_inputs(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(NotebookError, match="not a Jupyter notebook"):
        verify_notebook(text)
    with pytest.raises(NotebookError, match="No such file"):
        verify_notebook(tmp_path / "missing.ipynb")
    with pytest.raises(NotebookError, match="directory"):
        verify_notebook(tmp_path)


class RecordingLauncher:
    """The launcher hook the sandbox uses: it may rewrite the launch and clean up."""

    def __init__(self):
        self.calls = []
        self.extra_ro_paths = ()  # part of the declared launcher: verify adds an install site

    def prepare(self, km, launch_kw):
        self.calls.append("prepare")
        launch_kw["env"]["KA_LAUNCHED_BY"] = "test-launcher"
        return launch_kw

    def seal(self, km):
        self.calls.append("seal")

    def cleanup(self, km):
        self.calls.append("cleanup")


def test_launcher_and_kernel_manager_hooks(tmp_path):
    steps = [
        Step("import os\nprint(os.environ.get('KA_LAUNCHED_BY'), 'OPENAI_API_KEY' in os.environ)")
    ]
    os.environ["KA_LAUNCHED_BY"] = "test-launcher"  # not on the allowlist: the kernel never sees it
    try:
        transcript = build_transcript(tmp_path / "t.ipynb", steps, answer=None)
    finally:
        del os.environ["KA_LAUNCHED_BY"]
    assert transcript.nb.cells[1].outputs[0]["text"] == "None False\n"

    assert verify_notebook(transcript.path).reproduced, "the default launcher adds nothing"

    launcher, made = RecordingLauncher(), []

    def factory(name):
        made.append(name)
        return AsyncKernelManager(kernel_name=name)

    env = {**os.environ, "OPENAI_API_KEY": "sk-must-not-leak"}
    report = verify_notebook(
        transcript.path, launcher=launcher, kernel_manager_factory=factory, env=env
    )
    assert report.verdict == "differs", "the launcher's variable reached the kernel"
    assert "test-launcher False" in report.summary() or report.first_difference.number == 1
    assert launcher.calls == ["prepare", "seal", "cleanup"] and made == ["python3"]


def test_other_kernels_use_their_own_kernelspec(tmp_path):
    """The kernel comes from the notebook's kernelspec: here bash_kernel."""
    from kernel_agent import KernelSession, Transcript

    with KernelSession(kernel_name="bash", cwd=tmp_path) as kernel:
        transcript = Transcript(
            tmp_path / "bash.ipynb",
            kernelspec=kernel.kernelspec,
            language_info=kernel.language_info,
        )
        for code in ("X=4", "echo $((X * 10))"):
            transcript.add_code(code, kernel.execute(code), {"status": "ok"})
    assert transcript.nb.metadata.kernelspec["name"] == "bash"
    report = verify_notebook(transcript.path)
    assert report.kernel_name == "bash" and report.reproduced, report.summary()
    nb = nbformat.read(transcript.path, as_version=4)
    nb.cells[1].outputs[0]["text"] = "41\n"
    nbformat.write(nb, transcript.path)
    assert verify_notebook(transcript.path).first_difference.number == 2
