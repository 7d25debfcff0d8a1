"""``kernel-agent export`` through ``cli.main``."""

from __future__ import annotations

import sys

import nbformat
import pytest

from kernel_agent.errors import NotebookError
from kernel_agent.frontends.cli import main

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def notebook(tmp_path):
    nb = nbformat.v4.new_notebook(metadata={"kernel_agent": {"model": "m-1", "task": "say hi"}})
    nb.cells = [
        nbformat.v4.new_code_cell(
            "print('hi')",
            execution_count=1,
            outputs=[nbformat.v4.new_output("stream", name="stdout", text="hi\n")],
        )
    ]
    path = tmp_path / "hi.ipynb"
    nbformat.write(nb, path)
    return path


def test_export_html_and_markdown(notebook, tmp_path, capsys):
    assert main(["export", str(notebook)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "hi.html")
    assert "m-1" in (tmp_path / "hi.html").read_text()
    out = tmp_path / "docs" / "hi.md"
    assert main(["export", str(notebook), "--to", "markdown", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert "| Task | say hi |" in out.read_text()
    assert (
        main(
            [
                "export",
                str(notebook),
                "--to",
                "markdown",
                "-o",
                str(tmp_path / "plain.md"),
                "--no-provenance",
            ]
        )
        == 0
    )
    assert "provenance" not in (tmp_path / "plain.md").read_text()


def test_export_errors_are_one_line(notebook, tmp_path, capsys, monkeypatch):
    assert main(["export", str(tmp_path / "nope.ipynb")]) == NotebookError.exit_code
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("kernel-agent: error: cannot read notebook")

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KERNEL_AGENT_CHROMIUM", raising=False)
    monkeypatch.setitem(sys.modules, "playwright", None)
    assert main(["export", str(notebook), "--to", "pdf"]) == NotebookError.exit_code
    err = capsys.readouterr().err.strip()
    assert err == (
        "kernel-agent: error: PDF export needs Chromium (apt-get install chromium), "
        "playwright, or xelatex and pandoc; none was found"
    )


def test_unknown_format_is_a_usage_error(notebook, capsys):
    with pytest.raises(SystemExit) as info:
        main(["export", str(notebook), "--to", "docx"])
    assert info.value.code == 2
    assert "invalid choice: 'docx'" in capsys.readouterr().err
