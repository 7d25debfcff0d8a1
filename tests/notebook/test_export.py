"""export.py: HTML (self-contained), Markdown (+ image files), PDF, provenance header."""

from __future__ import annotations

import re
import sys

import nbformat
import pytest
from nbfactory import PLOT_STEPS, build_transcript, require_chromium

from kernel_agent.errors import ConfigError, ExportError, NotebookError
from kernel_agent.notebook.clean import write_pair
from kernel_agent.notebook.export import export_notebook, provenance_markdown
from kernel_agent.notebook.verify import record_verdict, verify_notebook

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def clean_path(tmp_path_factory):
    """A verified clean notebook of the plot task."""
    root = tmp_path_factory.mktemp("export")
    transcript = build_transcript(root / "run.ipynb", PLOT_STEPS)
    _, clean = write_pair(transcript, root / "run.ipynb", root / "run.clean.ipynb")
    record_verdict(clean, verify_notebook(clean))
    return clean


def test_html_is_self_contained_with_provenance(clean_path, tmp_path):
    out = export_notebook(clean_path, to="html", output=tmp_path / "report.html")
    assert out == tmp_path / "report.html"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"], "no files beside it"
    page = out.read_text()
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', page)) == 1
    assert not re.search(r'<img[^>]+src="(?!data:)', page)
    for expected in (
        "kernel-agent run: provenance",
        "test-model-7b",
        "1,545 tokens (1,200 prompt + 345 completion)",
        "Plot the squares of 0..4 and report their sum",
        "2025-01-02T03:04:05+00:00",
        "reproduced (4/4 code cells",
        "full transcript: run.ipynb",
        "mode=none",
    ):
        assert expected in page, expected
    assert page.index("provenance") < page.index("Make the data.")


def test_markdown_writes_images_beside_it(clean_path, tmp_path):
    out = export_notebook(clean_path, to="markdown", output=str(tmp_path) + "/")
    assert out == tmp_path / "run.clean.md"
    text = out.read_text()
    images = re.findall(r"!\[png\]\(([^)]+)\)", text)
    assert len(images) == 1 and re.fullmatch(
        r"run\.clean_md_files/run\.clean_\d+_0\.png", images[0]
    )
    assert (tmp_path / images[0]).read_bytes().startswith(b"\x89PNG")
    assert "| Model | test-model-7b |" in text
    assert "| Verify | reproduced (4/4 code cells" in text
    assert "```python\ntotal = int(squares.sum())" in text


def test_default_output_path_and_no_provenance(clean_path, tmp_path):
    copy = tmp_path / "nb.ipynb"
    copy.write_bytes(clean_path.read_bytes())
    out = export_notebook(copy, to="html", provenance=False)
    assert out == tmp_path / "nb.html"
    assert "kernel-agent run: provenance" not in out.read_text()


def test_notebook_from_elsewhere_has_no_provenance(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("hi")]
    assert provenance_markdown(nb) is None
    path = tmp_path / "plain.ipynb"
    nbformat.write(nb, path)
    assert "provenance" not in export_notebook(path, to="markdown").read_text()


def test_pdf_with_chromium(clean_path, tmp_path):
    require_chromium()
    out = export_notebook(clean_path, to="pdf", output=tmp_path / "r.pdf", pdf_engine="chromium")
    data = out.read_bytes()
    assert data.startswith(b"%PDF-") and len(data) > 20_000  # the plot is in it


def test_pdf_without_a_toolchain_says_what_is_missing(clean_path, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no chromium, xelatex or pandoc
    monkeypatch.delenv("KERNEL_AGENT_CHROMIUM", raising=False)
    monkeypatch.setitem(sys.modules, "playwright", None)  # not importable
    with pytest.raises(ExportError) as info:
        export_notebook(clean_path, to="pdf", output=tmp_path / "r.pdf")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("PDF export needs Chromium (apt-get install chromium)")
    with pytest.raises(ExportError, match="xelatex and pandoc are needed"):
        export_notebook(clean_path, to="pdf", output=tmp_path / "r.pdf", pdf_engine="latex")
    assert not (tmp_path / "r.pdf").exists()


def test_bad_requests(clean_path, tmp_path):
    with pytest.raises(ConfigError, match="choose html, markdown or pdf"):
        export_notebook(clean_path, to="docx")
    with pytest.raises(ConfigError, match="overwrite the notebook"):
        export_notebook(clean_path, to="html", output=clean_path)
    with pytest.raises(NotebookError, match="No such file"):
        export_notebook(tmp_path / "nope.ipynb")
