"""``kernel-agent verify`` through ``cli.main``: report, exit codes, one-line errors."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest
from nbfactory import PLOT_STEPS, build_transcript

from kernel_agent.errors import ConfigError, KernelNotFound, NotebookError, VerifyMismatch
from kernel_agent.frontends.cli import main
from kernel_agent.notebook.clean import write_pair

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def clean_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-verify")
    transcript = build_transcript(root / "run.ipynb", PLOT_STEPS[:3])
    return write_pair(transcript, root / "run.ipynb", root / "run.clean.ipynb")[1]


@pytest.fixture
def nb_copy(clean_path, tmp_path):
    target = tmp_path / "nb.ipynb"
    shutil.copy(clean_path, target)
    return target


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("[IPKernelApp]")]
    assert len(lines) == 1, err
    assert lines[0].startswith("kernel-agent: error: ")
    return lines[0]


def test_reproducing_notebook_exits_0(nb_copy, tmp_path, capsys):
    written = tmp_path / "again.ipynb"
    assert (
        main(["verify", str(nb_copy), "--write", str(written), "--timeout", "60", "--record"]) == 0
    )
    out, err = capsys.readouterr()
    assert "code cell   1  In [ 1]  same" in out
    assert "code cell   2  In [ 2]  same" in out
    assert "reproduced: 2/2 code cells reproduced; kernel start" in out
    assert "(originally " in out
    assert f"wrote the re-executed notebook to {written}" in out
    assert "error" not in err
    assert (
        nbformat.read(written, as_version=4).metadata.kernel_agent["verify"]["verdict"]
        == "reproduced"
    )
    assert (
        nbformat.read(nb_copy, as_version=4).metadata.kernel_agent["verify"]["verdict"]
        == "reproduced"
    )


def test_differing_notebook_shows_first_difference(nb_copy, capsys):
    nb = nbformat.read(nb_copy, as_version=4)
    [c for c in nb.cells if c.cell_type == "code"][1].outputs[0]["text"] = "29\n"
    nbformat.write(nb, nb_copy)
    assert main(["verify", str(nb_copy)]) == VerifyMismatch.exit_code
    out, err = capsys.readouterr()
    assert "code cell   2  In [ 2]  differs" in out
    assert "first difference: code cell 2 (In [2])" in out
    assert "  -29" in out and "  +30" in out
    line = one_error_line(err)
    assert "nb.ipynb did not reproduce" in line and "stdout differs" in line


def test_image_tolerance_flag(nb_copy, capsys):
    assert main(["verify", str(nb_copy), "--image-tolerance", "0"]) == 0
    assert main(["verify", str(nb_copy), "--image-tolerance", "2"]) == ConfigError.exit_code
    assert "image tolerance must be between 0 and 1" in one_error_line(capsys.readouterr().err)


BAD_CELL = {
    "cell_type": "code",
    "id": "a",
    "source": "x",
    "metadata": {},
    "execution_count": None,
    "outputs": [{"output_type": "bogus"}],
}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("just some text\n", "is not a Jupyter notebook (not JSON)"),
        (
            json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [BAD_CELL]}),
            "invalid notebook",
        ),
        (
            json.dumps(
                {
                    "nbformat": 4,
                    "nbformat_minor": 5,
                    "metadata": {},
                    "cells": [{"cell_type": "code"}],
                }
            ),
            "missing an expected key",
        ),
        (json.dumps({"hello": "world"}), "is not a valid notebook"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, capsys, content, message):
    path = tmp_path / "bad.ipynb"
    path.write_text(content)
    assert main(["verify", str(path)]) == NotebookError.exit_code
    assert message in one_error_line(capsys.readouterr().err)


def test_unreadable_paths(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "missing.ipynb")]) == NotebookError.exit_code
    assert "No such file or directory" in one_error_line(capsys.readouterr().err)
    assert main(["verify", str(tmp_path)]) == NotebookError.exit_code
    assert "is a directory" in one_error_line(capsys.readouterr().err)


def test_missing_kernelspec(nb_copy, capsys):
    nb = nbformat.read(nb_copy, as_version=4)
    nb.metadata.kernelspec["name"] = "klingon"
    nbformat.write(nb, nb_copy)
    assert main(["verify", str(nb_copy)]) == KernelNotFound.exit_code
    assert "no Jupyter kernel named 'klingon' is installed" in one_error_line(
        capsys.readouterr().err
    )
    assert main(["verify", str(nb_copy), "--kernel", "python3"]) == 0


def test_bad_timeout(nb_copy, capsys):
    assert main(["verify", str(nb_copy), "--timeout", "0"]) == ConfigError.exit_code
    assert "timeout must be positive" in one_error_line(capsys.readouterr().err)
