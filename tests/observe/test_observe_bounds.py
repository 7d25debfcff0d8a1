"""observe holds what it reads and keeps within bounds (surfaces 2026-11-27 rows 49-51).

Row 49: a 300 MB (sparse) ``.ipynb`` was read whole on every index load (2.9 GB for 5).
Row 50: the rendered-HTML cache kept every version of a notebook (+1.26 GB for 15).
Row 51: the listing followed ``leak.ipynb -> a root-only JSON`` and showed its task.
A real ``kernel-agent observe`` on 127.0.0.1 serves a directory of such files here.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import nbformat
import pytest
from crossing import SRC
from serve_server import free_port

from kernel_agent.observe.app import RenderCache
from kernel_agent.observe.runs import MAX_NOTEBOOK_BYTES, list_runs

pytestmark = pytest.mark.timeout(300)

SECRET_TASK = "ROOT-ONLY-SECRET-TASK-51"


def run_notebook(task: str, filler: int = 0) -> str:
    cell = nbformat.v4.new_code_cell("print('x')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * filler)]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernel_agent"] = {"task": task, "model": "m", "status": "ok"}
    return nbformat.writes(nb)


@pytest.fixture
def scene() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="ka-observe-"))
    runs = base / "runs"
    runs.mkdir()
    (runs / "good.ipynb").write_text(run_notebook("an honest run"))
    private = base / "private"
    private.mkdir(mode=0o700)
    secret = private / "secret.ipynb"
    secret.write_text(run_notebook(SECRET_TASK))
    secret.chmod(0o600)
    (runs / "leak.ipynb").symlink_to(secret)  # row 51
    (runs / "up.ipynb").symlink_to("../private/secret.ipynb")
    (runs / "inner.ipynb").symlink_to("good.ipynb")  # a link inside the dir: still a link
    (runs / "zero.ipynb").symlink_to("/dev/zero")
    os.mkfifo(runs / "fifo.ipynb")
    os.link(secret, runs / "hard.ipynb")  # a second name for a file elsewhere
    with open(runs / "big.ipynb", "wb") as fh:  # row 49: sparse, 300 MB
        fh.truncate(300 << 20)
    with open(runs / "big2.ipynb", "wb") as fh:  # just past the bound
        fh.write(b'{"cells": [], "metadata": {"kernel_agent": {"task": "')
        fh.truncate(MAX_NOTEBOOK_BYTES + 1)
    yield runs
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def observe(scene: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "observe", str(scene), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(SRC)}, stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "observe did not start"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def test_links_and_large_files_are_never_read(observe: tuple[str, int], scene: Path) -> None:
    url, pid = observe
    with httpx.Client(base_url=url, timeout=120) as http:
        with concurrent.futures.ThreadPoolExecutor(5) as pool:  # row 49: five at once
            pages = list(pool.map(lambda _: http.get("/"), range(5)))
        for page in pages:
            assert page.status_code == 200
            assert SECRET_TASK not in page.text  # row 51: no link, no hard link is read
            assert "an honest run" in page.text
            assert page.text.count("unreadable: over 100 MB") == 2  # listed, not read
            for name in ("leak", "up", "inner", "zero", "fifo", "hard"):
                assert f"/runs/{name}.ipynb" not in page.text
        # an index load reads at most the bound: far from 300 MB per load
        assert memory_kb(pid, "VmHWM") < 400_000
        for name in ("leak", "up", "inner", "zero", "fifo", "hard"):
            for route in ("", "/html", "/ipynb"):
                response = http.get(f"/runs/{name}.ipynb{route}")
                assert response.status_code == 404, (name, route)
                assert SECRET_TASK not in response.text
        big = http.get("/runs/big.ipynb")
        assert big.status_code == 200 and "over 100 MB" in big.text
        assert "not shown: over 100 MB" in http.get("/runs/big.ipynb/html").text
        assert http.get("/runs/good.ipynb/ipynb").text == (scene / "good.ipynb").read_text()


def test_rendered_pages_are_kept_within_bounds(scene: Path) -> None:
    """Row 50: twelve versions of a notebook, each rendered by a real server on loopback
    (in this process, to look at its cache): one page is kept, not twelve."""
    import uvicorn

    from kernel_agent.observe import create_app

    cache = RenderCache()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(scene, cache), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    path = scene / "grow.ipynb"
    try:
        while not server.started:
            time.sleep(0.05)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            for i in range(12):
                path.write_text(run_notebook(f"grows {i}", filler=1 << 20))
                page = http.get("/runs/grow.ipynb/html")
                assert page.status_code == 200 and f"grows {i}" in page.text
                assert len(cache) == 1 and cache.size < 2 * len(page.text)
            assert http.get("/runs/good.ipynb/html").status_code == 200
            assert len(cache) == 2
    finally:
        server.should_exit = True
        thread.join(30)


def test_the_render_cache_is_an_lru_bounded_by_count_and_bytes() -> None:
    cache = RenderCache(entries=3, max_bytes=1000)
    for i in range(5):
        cache.put((f"/d/{i}.ipynb", 1, 1, 1), "x" * 100)
    assert len(cache) == 3 and cache.get(("/d/0.ipynb", 1, 1, 1)) is None
    assert cache.get(("/d/2.ipynb", 1, 1, 1)) is not None  # used: now the newest
    cache.put(("/d/5.ipynb", 1, 1, 1), "x" * 100)
    assert cache.get(("/d/2.ipynb", 1, 1, 1)) is not None
    assert cache.get(("/d/3.ipynb", 1, 1, 1)) is None
    cache.put(("/d/6.ipynb", 1, 1, 1), "x" * 900)  # bytes: the older ones go
    assert cache.size <= 1000
    cache.put(("/d/6.ipynb", 2, 1, 1), "y" * 10)  # a new version replaces the old
    assert (
        cache.get(("/d/6.ipynb", 1, 1, 1)) is None
        and len(cache.get(("/d/6.ipynb", 2, 1, 1)) or "") == 10
    )
    cache.put(("/d/7.ipynb", 1, 1, 1), "z" * 5000)  # larger than the whole cache: not kept
    assert cache.get(("/d/7.ipynb", 1, 1, 1)) is None


def test_listing_in_process_skips_links_and_bounds_reads(scene: Path) -> None:
    listed = {r.name: r for r in list_runs(scene)}
    assert set(listed) == {"good.ipynb", "big.ipynb", "big2.ipynb"}
    assert listed["big.ipynb"].status == "unreadable"
