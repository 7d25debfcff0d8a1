"""Rendering what a kernel produced, replayed from redteam 2026-11-24 (H5, H7, H4, K3, I3).

H5: a kernel displayed iframes of ``/etc/shadow``, of a root-only file and of an
internal HTTP page, and a script that fetched a beacon; ``export --to pdf`` (root,
``--no-sandbox``, ``file://``) printed all three into the PDF and the server logged
the requests. Now Chromium renders as an unprivileged uid in its own sandbox, from no
file, with no script and no network: the PDF holds none of it and the server hears
nothing. H7: ``export --to markdown`` deleted the run's ``<nb>_files/``. H4/K3: verify
printed OSC 52 raw, and bidi controls reached the terminal. I3: a decompression-bomb PNG
raised out of ``compare_images`` and ``run --verify`` lost its answer.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest
from fake_openai import run_cell, text
from nbfactory import require_chromium

from kernel_agent.sandbox import bwrap_problem

pytestmark = pytest.mark.timeout(240)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no bwrap sandbox here: {PROBLEM}")
SECRET = "ROOT-ONLY-VICTIM-CONTENT"
INTERNAL = "INTERNAL-ONLY-SERVICE-DATA token=abc123"


class Listener:
    """A loopback HTTP server that serves a secret page and records every request."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.requests.append(self.path)
                body = INTERNAL.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file only its owner may read, in a directory only its owner may enter."""
    folder = tmp_path / "outside"
    folder.mkdir(mode=0o700)
    secret = folder / "victim"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return secret


def attack_html(victim: Path, url: str) -> str:
    return (
        "<h3>Figure 1</h3>"
        f'<iframe src="file://{victim}" width="900" height="60"></iframe>'
        '<iframe src="file:///etc/shadow" width="900" height="60"></iframe>'
        '<iframe src="file:///etc/passwd" width="900" height="60"></iframe>'
        f'<iframe src="{url}/internal" width="900" height="60"></iframe>'
        f'<img src="{url}/img-from-kernel-output">'
        f'<link rel="stylesheet" href="{url}/css-from-kernel-output">'
        f"<div style=\"background: url('{url}/css-background')\">styled</div>"
        f'<object data="{url}/object"></object>'
        f"<script>document.write('SCRIPT-RAN');fetch('{url}/beacon-from-kernel-output')</script>"
        f'<meta http-equiv="refresh" content="0;url={url}/refresh">'
    )


def pdf_text(pdf: Path) -> str:
    if shutil.which("pdftotext") is None:
        if os.environ.get("CI"):
            pytest.fail("pdftotext is missing in CI: make test runs system-deps-chromium")
        pytest.skip("pdftotext is not installed (apt-get install poppler-utils)")
    return subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout


def secrets_in(found: str) -> list[str]:
    """Which of the host's secrets ``found`` holds."""
    leaks = [s for s in (SECRET, INTERNAL, "SCRIPT-RAN") if s in found]
    try:
        shadow = Path("/etc/shadow").read_text().splitlines()[0]
    except (OSError, IndexError):
        shadow = ""
    if shadow and shadow[:20] in found:
        leaks.append("/etc/shadow")
    passwd = Path("/etc/passwd").read_text().splitlines()[0]
    if passwd[:16] in found:  # world-readable, yet no file may be framed at all
        leaks.append("/etc/passwd")
    return leaks


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        capture_output=True, text=True, cwd=cwd, timeout=200,
        env={**env, "KERNEL_AGENT_LEVERS": "none"},
    )  # fmt: skip


# ------------------------------------------------------------------------- H5
@needs_bwrap
def test_h5_pdf_of_a_run_shows_no_host_file_and_makes_no_request(
    fake_llm, tmp_path: Path, listener: Listener, victim: Path
) -> None:  # noqa: ANN001
    require_chromium()
    cell = (
        "from IPython.display import HTML, display\n"
        f"display(HTML({attack_html(victim, listener.url)!r}))\n"
    )
    fake_llm.enqueue(run_cell(cell), text("Figure 1 is shown."))
    nb = tmp_path / "notebooks" / "x2.ipynb"
    run = cli(
        ["run", "--base-url", fake_llm.base_url, "--model", "t", "--sandbox", "bwrap",
         "--notebook", str(nb), "show the figure"], tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    for notebook in (nb, nb.with_name("x2.clean.ipynb")):
        out = cli(["export", str(notebook), "--to", "pdf"], tmp_path)
        assert out.returncode == 0, out.stderr
        found = pdf_text(notebook.with_suffix(".pdf"))
        assert "Figure 1" in found  # the output was rendered ...
        assert secrets_in(found) == []  # ... and nothing of the host came with it
    assert listener.requests == []


def test_h5_each_layer_holds_without_the_policy(
    tmp_path: Path, listener: Listener, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no CSP at all, the script is still off and every request still refused."""
    require_chromium()
    from kernel_agent.notebook import chromium

    monkeypatch.setattr(chromium, "with_csp", lambda html: html)
    page = f"<html><head></head><body>{attack_html(victim, listener.url)}</body></html>"
    rendered = chromium.render_pdf(page, timeout=90)
    (tmp_path / "raw.pdf").write_bytes(rendered.data)
    found = pdf_text(tmp_path / "raw.pdf")
    assert "Figure 1" in found and secrets_in(found) == []
    assert listener.requests == []
    blocked = {url.removeprefix(listener.url) for url in rendered.blocked}
    assert {"/internal", "/img-from-kernel-output"} <= blocked  # refused over DevTools
    assert "/beacon-from-kernel-output" not in blocked  # never asked for: no script ran
    if os.geteuid() == 0:
        assert rendered.uid not in (0, -1)  # a leased uid, never root
    assert rendered.sandboxed, "Chromium's own sandbox should start on this host"


def test_the_page_gets_the_policy_first(tmp_path: Path) -> None:
    from kernel_agent.notebook.chromium import RENDER_CSP, with_csp

    page = with_csp('<!DOCTYPE html>\n<html>\n<head lang="en"><meta charset="utf-8">x')
    assert page.startswith(
        f'<!DOCTYPE html>\n<html>\n<head lang="en"><meta http-equiv="Content-Security-Policy" '
        f'content="{RENDER_CSP}"><meta charset="utf-8">'
    )
    assert with_csp("<p>no head</p>").startswith('<meta http-equiv="Content-Security-Policy"')
    disarmed = with_csp("<head></head><META content='0' HTTP-EQUIV = 'Refresh'>")
    assert "<META content='0' data-disarmed-http-equiv = 'Refresh'>" in disarmed


def test_a_page_that_refreshes_itself_away_is_still_printed(tmp_path: Path) -> None:
    require_chromium()
    from kernel_agent.notebook.chromium import render_pdf

    page = '<meta http-equiv="refresh" content="0;url=about:blank"><h1>Figure 1</h1>'
    (tmp_path / "r.pdf").write_bytes(render_pdf(page, timeout=60).data)
    assert "Figure 1" in pdf_text(tmp_path / "r.pdf")


# ------------------------------------------------------------------------- H7
def tiny_png() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (255, 0, 255)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_h7_markdown_export_keeps_the_runs_files(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": tiny_png()})]
    nb.cells = [cell]
    path = tmp_path / "c1.ipynb"
    nbformat.write(nb, path)
    files = tmp_path / "c1_files"
    for rel, content in {
        "cell1_0.png": "image",
        "work/data.csv": "a,b\n",
        "result/res.txt": "42",
    }.items():
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        (files / rel).write_text(content)
    mine = tmp_path / "c1_md_files"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    (mine / "c1_9_9.png").write_text("an earlier export's image")
    from kernel_agent.notebook.export import export_notebook

    out = export_notebook(path, to="markdown")
    assert (files / "result" / "res.txt").read_text() == "42"
    assert (files / "work" / "data.csv").read_text() == "a,b\n"
    assert (files / "cell1_0.png").read_text() == "image"
    assert sorted(p.name for p in mine.iterdir()) == ["c1_0_0.png", "notes.txt"]
    assert "](c1_md_files/c1_0_0.png)" in out.read_text()


# -------------------------------------------------------------------- H4, K3
TROJAN = 'if role != "user\u202e \u2066# admin only\u2069 \u2066":\u200b\u200d\u2060\ufeff\u200e'
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def test_k3_visible_shows_bidi_and_zero_width_characters_escaped() -> None:
    from kernel_agent.frontends.render import visible

    shown = visible(TROJAN + "\x1b]52;c;cHduZWQ=\x07\r\n\tok é 中 😀")
    assert shown == (
        'if role != "user\\u202e \\u2066# admin only\\u2069 \\u2066":\\u200b\\u200d\\u2060'
        "\\ufeff\\u200e\\x1b]52;c;cHduZWQ=\\x07\\r\n\tok é 中 😀"
    )
    assert visible(shown) == shown  # idempotent


def test_h4_verify_prints_no_escape_raw(tmp_path: Path) -> None:
    cell = nbformat.v4.new_code_cell(
        "print('\\x1b]0;RETITLED-BY-NOTEBOOK\\x07\\x1b[1A\\x1b[2Kall good \\u202e1gnp.exe')"
    )
    cell.outputs = [
        nbformat.v4.new_output(
            "stream", name="stdout", text="stored \x1b]52;c;cHduZWQ=\x07\x1b[2J\n"
        )
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3\x1b]0;x\x07"}
    path = tmp_path / "h4.ipynb"
    nbformat.write(nb, path)
    proc = cli(["verify", str(path), "--timeout", "60"], tmp_path)
    assert proc.returncode == 7, proc.stderr  # VerifyMismatch
    assert RAW.findall(proc.stdout) == []
    assert "\\x1b]52;c;cHduZWQ=\\x07" in proc.stdout  # shown, escaped
    assert "\\x1b]0;RETITLED-BY-NOTEBOOK\\x07" in proc.stdout and "\\u202e" in proc.stdout


def test_a_comparison_keeps_no_control_character_raw() -> None:
    from kernel_agent.notebook.compare import compare_outputs

    stored = [{"output_type": "error", "ename": "E\x1b]0;t\x07", "evalue": TROJAN, "traceback": []}]
    fresh = [{"output_type": "stream", "name": "stdout", "text": "\x1b]52;c;eA==\x07" + TROJAN}]
    result = compare_outputs(stored, fresh)
    assert not result.same
    assert RAW.findall("\n".join(result.problems + result.diff)) == []
    assert any("\\x1b]52;c;eA==\\x07" in line for line in result.diff)


# ------------------------------------------------------------------------- I3
def bomb_png(width: int, height: int, value: int = 0xFF) -> bytes:
    """A PNG of one colour: a few hundred KB that decode to width x height x 3 bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    row = b"\x00" + bytes([value]) * (3 * width)
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    )


def test_i3_images_past_the_bound_are_compared_without_decoding() -> None:
    from kernel_agent.edges.images import bound_image
    from kernel_agent.notebook.compare import compare_images, render_outputs

    huge = bomb_png(14000, 13000)  # past Pillow's own bound: it raised out of compare
    over = bomb_png(7000, 6000)  # 42 Mpx: past ours, under Pillow's
    for a, b in ((huge, bomb_png(14000, 13000, 0)), (over, bomb_png(7000, 6000, 0))):
        result = compare_images(a, b)
        assert not result.same and result.reason.startswith("image too large"), result.reason
    assert compare_images(huge, huge).same  # the same bytes: no pixel decoded
    assert "7000x6000 pixels, over the 40,000,000 pixel bound" in compare_images(over, huge).reason
    assert bound_image("image/png", base64.b64encode(over).decode()) is None
    shown = [
        render_outputs([{"output_type": "display_data", "data": {"image/png": b64}}])
        for b64 in (base64.b64encode(huge).decode(), base64.b64encode(over).decode())
    ]
    assert shown == [["[display_data image/png too large]"], ["[display_data image/png 7000x6000]"]]


@needs_bwrap
def test_i3_run_verify_with_a_bomb_still_prints_the_answer(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    """The review's cell, with a colour that differs between the run and its verify."""
    cell = (
        "import base64, random, struct, zlib\n"
        "from IPython.display import display\n"
        "def png(w, h, v):\n"
        "    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + "
        "struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)\n"
        "    row = b'\\x00' + bytes([v]) * (3 * w)\n"
        "    co = zlib.compressobj(9); data = b''.join(co.compress(row) for _ in range(h)) + co.flush()\n"
        "    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))\n"
        "            + chunk(b'IDAT', data) + chunk(b'IEND', b''))\n"
        "display({'image/png': base64.b64encode(png(14000, 13000, random.randrange(256))).decode()}, raw=True)\n"
    )
    fake_llm.enqueue(run_cell(cell), text("The picture is shown."))
    nb = tmp_path / "i3.ipynb"
    proc = cli(
        ["run", "--base-url", fake_llm.base_url, "--model", "t", "--sandbox", "bwrap", "--verify",
         "--format", "plain", "--notebook", str(nb), "show it"], tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "The picture is shown."
    assert "image too large" in proc.stderr  # the verify notice says why the cell differs
    verify = nbformat.read(nb, as_version=4).metadata["kernel_agent"]["verify"]
    assert verify["verdict"] == "differs"


# ----------------------------------------------------------- surfaces row 57
def test_57_html_export_embeds_no_file_from_outside_the_notebooks_dir(
    tmp_path: Path, victim: Path
) -> None:
    """nbconvert < 7.17.1 base64-embedded ``![](/etc/shadow)`` for a root exporter."""
    from importlib.metadata import version

    from packaging.version import Version

    from kernel_agent.notebook.export import export_notebook

    assert Version(version("nbconvert")) >= Version("7.17.1")  # pyproject's floor
    link = f"![a]({victim}) ![b](/etc/shadow) ![c](../outside/victim)"
    cell = nbformat.v4.new_code_cell("show()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": link})]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(link), cell])
    (tmp_path / "nbs").mkdir()
    path = tmp_path / "nbs" / "third-party.ipynb"
    nbformat.write(nb, path)
    page = export_notebook(path, to="html").read_text()
    assert base64.b64encode(SECRET.encode()).decode()[:16] not in page
    assert re.search(r"<img[^>]+src=\"data:", page) is None  # nothing was read to embed
    assert page.count("<img") == 6  # the links stayed links


def test_without_its_sandbox_chromium_still_renders_unprivileged_and_says_why() -> None:
    """A host where Chromium's sandbox cannot start (no user namespaces for it, no usable
    setuid helper): the render is retried without it, as the same unprivileged uid."""
    require_chromium()
    if os.geteuid() != 0 or PROBLEM is not None:
        pytest.skip("needs root (to become nobody) and bwrap (to take user namespaces away)")
    from crossing import package_for_others, sandbox_argv

    from kernel_agent.sandbox.mounts import interpreter_paths

    code = (
        "import logging; logging.basicConfig(level=logging.WARNING)\n"
        "from kernel_agent.notebook.chromium import render_pdf\n"
        "r = render_pdf('<h1>Figure 1</h1>', timeout=60)\n"
        "print(r.data[:5].decode(), r.sandboxed, r.uid)\n"
    )
    python = next((p for p in (sys.executable, "/usr/bin/python3") if _runs_as_nobody(p)), None)
    if python is None:
        pytest.skip("no Python here that the nobody user may run")
    with package_for_others() as site:
        # Debian's chromium script reads its settings from /etc
        settings = [p for p in (Path("/etc/chromium.d"), Path("/etc/chromium")) if p.exists()]
        bwrap = sandbox_argv("bwrap", [site, *interpreter_paths(python), *settings])
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "env", "-i", "PATH=/usr/bin:/bin", "HOME=/tmp", f"PYTHONPATH={site}",
             *bwrap, "--unshare-user", "--disable-userns", "--", python, "-c", code],
            capture_output=True, text=True, timeout=120, cwd="/",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["%PDF-", "False", "65534"]
    assert "Chromium's sandbox does not start here" in proc.stderr
    assert "rendering as unprivileged uid 65534 without it" in proc.stderr


def _runs_as_nobody(python: str) -> bool:
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i",
             python, "-c", "0"],
            capture_output=True, timeout=30, cwd="/",
        )  # fmt: skip
    except OSError:
        return False
    return done.returncode == 0
