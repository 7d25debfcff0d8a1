"""What is copied from a notebook on a Jupyter server: its cells are a stranger's data.

The property: whatever shapes the shared document's outputs take, the transcript gets
valid nbformat with bounded plain-text values, or nothing; and the ids and paths that
go into URLs are checked. (Pure units: the document is a pycrdt replica made here.)
"""

from __future__ import annotations

import nbformat
import pytest

from kernel_agent.errors import ConfigError, JupyterError
from kernel_agent.jupyter.context import _plain_output, record_user_cells, with_context
from kernel_agent.jupyter.server import _id, check_notebook_path
from kernel_agent.jupyter.shared_doc import SharedNotebook
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.notebook.transcript import Transcript

HOSTILE_OUTPUTS = [
    {"output_type": "stream", "name": "../../etc/passwd", "text": "x"},  # not a stream name
    {"output_type": "stream", "name": "stdout", "text": {"not": "text"}},
    {"output_type": "display_data", "data": {"text/html": {"nested": ["object"]}}},
    {"output_type": "display_data", "data": "not a bundle"},
    {"output_type": "execute_result", "data": {"text/plain": "ok"}, "execution_count": -5},
    {"output_type": "error", "ename": 7, "evalue": None, "traceback": "not a list"},
    {"output_type": "update_display_data", "data": {"text/plain": "x"}},
    {"output_type": "stream", "name": "stdout", "text": "A" * 500_000},  # huge
    {"output_type": "display_data", "data": {f"x/{i}": "v" for i in range(1000)}},
]


def doc_with(cells: list[dict]) -> SharedNotebook:
    doc = SharedNotebook("ws://unused", {})
    for cell in cells:
        doc.notebook.append_cell(cell)
    return doc


def test_hostile_outputs_become_valid_bounded_nbformat_or_nothing(tmp_path):
    doc = doc_with(
        [
            {"cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": HOSTILE_OUTPUTS,
             "execution_count": 3},
            {"cell_type": "code", "source": "   ", "metadata": {}, "outputs": []},
            {"cell_type": "markdown", "source": "# notes", "metadata": {}},
        ]
    )  # fmt: skip
    # a peer may put anything in the shared document: not even a map for an output
    doc.notebook.ycells[0]["outputs"].append(["not", "a", "dict"])
    doc.notebook.ycells[0]["outputs"].append(42)
    transcript = Transcript(tmp_path / "t.ipynb", kernelspec={}, language_info={})
    assert record_user_cells(transcript, doc) == 1  # empty and markdown cells are not copied
    nb = nbformat.read(tmp_path / "t.ipynb", as_version=4)
    nbformat.validate(nb)
    (cell,) = [c for c in nb.cells if c.cell_type == "code"]
    assert cell.source == "x = 1" and cell.execution_count == 3
    assert cell.metadata["kernel_agent"]["source"] == "jupyter-user"
    kinds = [o.output_type for o in cell.outputs]
    assert "update_display_data" not in kinds
    for output in cell.outputs:
        if output.output_type == "stream":
            assert output.name in ("stdout", "stderr") and len(output.text) <= 100_000
        if output.output_type == "execute_result":
            assert output.execution_count is None  # -5 was dropped
        if output.output_type == "display_data":
            assert len(output.data) <= 20
            assert all(isinstance(v, str) for v in output.data.values())


@pytest.mark.parametrize("bad", [None, 3, "x", {"output_type": "stream"}, {"output_type": "nope"}])
def test_what_is_not_an_output_is_dropped(bad):
    assert _plain_output(bad) is None


@pytest.mark.parametrize(
    "path",
    [
        "../x.ipynb",
        "a/../../b.ipynb",
        "a.txt",
        "",
        "a//b.ipynb",
        "a/./b.ipynb",
        "a\x00.ipynb",
        "a\n.ipynb",
    ],
)
def test_a_notebook_path_that_could_escape_or_is_not_a_notebook_is_refused(path):
    with pytest.raises(ConfigError):
        check_notebook_path(path)


def test_a_notebook_path_is_taken_as_the_server_names_it():
    assert check_notebook_path("/work/data.ipynb") == "work/data.ipynb"
    assert check_notebook_path("dir with space/n.ipynb") == "dir with space/n.ipynb"


@pytest.mark.parametrize("bad", ["../../api/kernels", "a/b", "a?b=1", "x" * 300, None, 5, ""])
def test_an_id_from_the_server_that_could_steer_a_url_is_refused(bad):
    with pytest.raises(JupyterError, match="malformed"):
        _id(bad, "kernel id")


def test_the_task_carries_the_notebook_and_its_variables():
    info = VariableInfo("df", "DataFrame", shape="(3, 1)")
    text = with_context("Sum v", "You are working in 'a.ipynb'", {"df": info})
    assert text.startswith("Sum v\n\n(You are working in 'a.ipynb')")
    assert "df (DataFrame" in text


def test_a_cell_the_schema_cannot_read_is_skipped_not_a_crash(tmp_path):
    from pycrdt import Map

    doc = doc_with([{"cell_type": "code", "source": "ok = 1", "metadata": {}, "outputs": []}])
    doc.notebook.ycells.append(Map({"cell_type": 5, "source": 7}))
    doc.notebook.ycells.append(Map({}))
    doc.notebook.ycells.append("just text")
    doc.notebook.ycells.append(Map({"cell_type": "code", "source": 3, "outputs": "x"}))
    assert [c["source"] for c in doc.cells() if c.get("cell_type") == "code"][0] == "ok = 1"
    assert "ok = 1" in doc.describe()
    transcript = Transcript(tmp_path / "t.ipynb", kernelspec={}, language_info={})
    record_user_cells(transcript, doc)
    nbformat.validate(nbformat.read(tmp_path / "t.ipynb", as_version=4))


def test_describe_marks_the_agents_cells_and_bounds_each_source():
    doc = doc_with(
        [
            {"cell_type": "code", "source": "y" * 5000, "metadata": {}, "outputs": [], "execution_count": 1},
            {"cell_type": "code", "source": "z = 2", "metadata": {"kernel_agent": {"source": "agent"}},
             "outputs": [], "execution_count": 2},
        ]
    )  # fmt: skip
    text = doc.describe()
    assert "In [1]:" in text and "(3000 more chars)" in text
    assert "In [2] (kernel-agent's):\nz = 2" in text
