"""clean.py: the clean notebook keeps what built the final state, renumbered."""

from __future__ import annotations

import copy
import json

import nbformat
import pytest
from nbfactory import PLOT_STEPS, Step, build_transcript
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from kernel_agent.errors import ConfigError
from kernel_agent.notebook.clean import clean_notebook, clean_path_for, write_pair

pytestmark = pytest.mark.timeout(120)


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _stdout(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.fixture(scope="module")
def plot_transcript(tmp_path_factory):
    return build_transcript(tmp_path_factory.mktemp("clean") / "run.ipynb", PLOT_STEPS)


def test_failed_attempts_are_dropped_and_counts_renumbered(plot_transcript):
    full = plot_transcript.nb
    before = json.dumps(full, sort_keys=True)
    clean = clean_notebook(full)
    assert json.dumps(full, sort_keys=True) == before, "the transcript must not be modified"
    nbformat.validate(clean)

    sources = [c.source for c in _code(clean)]
    assert sources == [PLOT_STEPS[i].code for i in (0, 2, 3, 4)]
    assert all("squares.sum(\n" not in s for s in sources)
    assert [c.execution_count for c in _code(clean)] == [1, 2, 3, 4]
    # the original counts were 1, 3, 4, 5 (the failed attempt took 2)
    assert [c.metadata.kernel_agent["transcript_execution_count"] for c in _code(clean)] == [
        1,
        3,
        4,
        5,
    ]
    last = _code(clean)[-1].outputs[0]
    assert last.output_type == "execute_result" and last.execution_count == 4
    assert _stdout(_code(clean)[1]) == "30\n"
    assert any("image/png" in o.get("data", {}) for o in _code(clean)[2].outputs)

    roles = [
        c.metadata.get("kernel_agent", {}).get("role")
        for c in clean.cells
        if c.cell_type == "markdown"
    ]
    assert roles == ["task", "prose", "prose", "prose", "answer"]
    assert clean.cells[0].source == plot_transcript.nb.cells[0].source
    assert clean.cells[-1].source == "The sum of the squares is 30."
    info = clean.metadata.kernel_agent["clean"]
    assert "renumbered" in info["execution_counts"]
    assert info["dropped"] == {"error": 1}
    assert clean.metadata.kernelspec == full.metadata.kernelspec
    assert clean.metadata.kernel_agent["model"] == "test-model-7b"


def test_restart_wipes_state_and_replays_rebuild_it(tmp_path):
    steps = [
        Step("a = 1\nprint('a set')", prose="Set a."),
        Step("b = 2\nprint('b set')", prose="Set b."),
        Step("import os\nos._exit(1)"),  # the kernel dies and is restarted
        Step("a = 1\nprint('a set')", replay=True),  # the agent rebuilds a, not b
        Step("a = 1\nprint('a set')", replay=True),  # a duplicate replay
        Step("print(b)", skipped=True),
        Step("c = a + 1\nprint(c)", prose="Use a."),
    ]
    transcript = build_transcript(tmp_path / "restart.ipynb", steps, answer="c is 2.")
    died = _code(transcript.nb)[2]
    assert died.metadata.kernel_agent["status"] == "died"
    assert died.metadata.kernel_agent["restarted"] is True

    clean = clean_notebook(transcript)
    nbformat.validate(clean)
    code = _code(clean)
    assert [c.source for c in code] == ["a = 1\nprint('a set')", "c = a + 1\nprint(c)"]
    assert code[0].metadata.kernel_agent.get("replay") is True, "the replay built the final state"
    assert code[0].metadata.kernel_agent["transcript_cell"] == 6
    assert [c.execution_count for c in code] == [1, 2]
    assert _stdout(code[1]) == "2\n"
    prose = [
        c.source for c in clean.cells if c.metadata.get("kernel_agent", {}).get("role") == "prose"
    ]
    assert prose == ["Set a.", "Use a."], "the replay inherits its original's prose; b's is gone"
    dropped = clean.metadata.kernel_agent["clean"]["dropped"]
    assert dropped == {
        "died": 1,
        "duplicate replay": 1,
        "prose": 1,
        "skipped": 1,
        "superseded by replay": 1,
        "wiped": 1,
    }


def test_notebook_from_elsewhere_drops_error_cells():
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("intro"),
        new_code_cell(
            "1/0",
            execution_count=1,
            outputs=[new_output("error", ename="ZeroDivisionError", evalue="x", traceback=[])],
        ),
        new_code_cell("x = 1", execution_count=2),
        new_markdown_cell("trailing words"),
    ]
    clean = clean_notebook(nb)
    nbformat.validate(clean)
    assert [c.source for c in clean.cells] == ["x = 1"]
    assert clean.cells[0].execution_count == 1
    assert clean.metadata.kernel_agent["clean"]["dropped"] == {"error": 1, "prose": 2}


def test_write_pair_links_both_notebooks(plot_transcript, tmp_path):
    transcript = copy.deepcopy(plot_transcript.nb)
    full_path, clean_path = tmp_path / "out" / "run.ipynb", tmp_path / "out" / "run.clean.ipynb"
    assert clean_path_for(full_path) == clean_path
    write_pair(transcript, full_path, clean_path)
    full = nbformat.read(full_path, as_version=4)
    clean = nbformat.read(clean_path, as_version=4)
    nbformat.validate(full)
    nbformat.validate(clean)
    assert full.metadata.kernel_agent["clean_notebook"] == "run.clean.ipynb"
    assert clean.metadata.kernel_agent["transcript"] == "run.ipynb"
    assert "clean_notebook" not in clean.metadata.kernel_agent
    assert len(full.cells) == len(plot_transcript.nb.cells)
    assert full_path.read_text() == nbformat.writes(full)

    elsewhere = tmp_path / "clean" / "c.ipynb"
    write_pair(transcript, full_path, elsewhere)
    assert (
        nbformat.read(elsewhere, as_version=4).metadata.kernel_agent["transcript"]
        == "../out/run.ipynb"
    )
    with pytest.raises(ConfigError):
        write_pair(transcript, full_path, full_path)


def test_write_pair_with_a_transcript_object_saves_it(tmp_path):
    transcript = build_transcript(tmp_path / "t.ipynb", [Step("print('hi')")])
    write_pair(transcript, transcript.path, tmp_path / "t.clean.ipynb")
    on_disk = nbformat.read(transcript.path, as_version=4)
    assert on_disk.metadata.kernel_agent["clean_notebook"] == "t.clean.ipynb"
    assert transcript.path.read_text() == transcript.render()
