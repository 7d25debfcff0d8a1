"""The Session every front end shares: a real (sandboxed where the host allows) kernel."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from kernel_agent.edges.images import bound_image, from_data_url
from kernel_agent.errors import ConfigError, UnsafePath
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.session import Session
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(120)
SANDBOXED = bwrap_problem()[0] is None


def _settings(work: Path, **kw: Any) -> Settings:
    return Settings.from_env(cwd=work, **kw)


def _session(tmp_path: Path, **kw: Any) -> Session:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Session(_settings(work, **kw), notebook=tmp_path / "nb" / "t.ipynb", front_end="test")


def _valid(path: Path) -> Any:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


async def _in_session(tmp_path: Path, body: Any, **kw: Any) -> Any:
    async with _session(tmp_path, **kw) as session:
        return await body(session)


def test_cells_are_recorded_with_provenance_and_namespace_change(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        run = await s.run_cell(
            "x = 41 + 1\nprint(x)", provenance={"source": "test", "tool": "run_cell"}
        )
        err = await s.run_cell("y = [1, 2]\n1/0")
        return s, run, err

    s, run, err = asyncio.run(_in_session(tmp_path, body))
    assert run.result.ok and "42" in run.text and "new: x (int = 42)" in run.variables
    assert err.result.status == "error" and "ZeroDivisionError" in err.text
    assert (
        "y (list, len 2)" in err.variables
    )  # the probe after an error still reports the namespace
    nb = _valid(s.notebook_path)
    meta = nb.cells[0].metadata["kernel_agent"]
    assert meta["status"] == "ok" and meta["source"] == "test" and meta["tool"] == "run_cell"
    assert meta["exec_s"] >= 0 and meta["started"] and meta["ended"] and "wait_s" in meta
    run_meta = nb.metadata["kernel_agent"]
    assert run_meta["session"]["front_end"] == "test" and run_meta["session"]["ended"]
    if SANDBOXED:
        assert run_meta["sandbox"]["mode"] == "bwrap"


def test_empty_code_and_bad_timeout_are_refused(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        with pytest.raises(ConfigError, match="empty"):
            await s.run_cell("  ")
        with pytest.raises(ConfigError, match="positive"):
            await s.run_cell("1", timeout=0)

    asyncio.run(_in_session(tmp_path, body))


def test_timeout_interrupts_then_stubborn_cell_restarts_and_rebuilds(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        await s.run_cell("a = 1")
        soft = await s.run_cell("import time\nwhile True: time.sleep(0.05)", timeout=1)
        kept = await s.run_cell("print(a)")
        hard = await s.run_cell(
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)",
            timeout=1,
        )
        after = await s.run_cell("print(a + 1)")
        return s, soft, kept, hard, after

    s, soft, kept, hard, after = asyncio.run(_in_session(tmp_path, body, rebuild_max_cell_s=5.0))
    assert soft.result.status == "timeout" and not soft.result.restarted and "kept" in soft.text
    assert kept.result.ok and "1" in kept.text
    assert hard.result.status == "timeout" and hard.result.restarted
    assert "rebuilt by replaying" in hard.rebuild_note and "a" in hard.rebuild_note
    assert after.result.ok and "2" in after.text
    nb = _valid(s.notebook_path)
    assert any(c.metadata.get("kernel_agent", {}).get("replay") for c in nb.cells)


def test_kernel_death_is_reported_and_state_rebuilt(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        await s.run_cell("import os\nkeep = 'yes'")
        died = await s.run_cell("os.kill(os.getpid(), 9)")
        after = await s.run_cell("print(keep)")
        return died, after

    died, after = asyncio.run(_in_session(tmp_path, body))
    assert died.result.status == "died" and died.result.restarted
    assert "keep" in died.rebuild_note
    assert after.result.ok and "yes" in after.text


def test_restart_with_and_without_rebuild(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        await s.run_cell("v = 7")
        kept = await s.restart(rebuild=True)
        v = await s.run_cell("print(v)")
        gone = await s.restart(rebuild=False)
        names = await s.variables()
        return s, kept, v, gone, names

    s, kept, v, gone, names = asyncio.run(_in_session(tmp_path, body))
    assert "survived: v" in kept and v.result.ok and "7" in v.text
    assert "every variable" in gone and "v" in gone and names == {}
    clean = s.notebook_text(clean=True)
    assert "v = 7" not in clean  # wiped by the restart without rebuild


def test_cancelled_caller_interrupts_the_kernel_and_the_cell_is_recorded(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        task = asyncio.ensure_future(
            s.run_cell("import time\nfor i in range(600): time.sleep(0.05)")
        )
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after = await s.run_cell("print('next')")  # waits for the interrupted cell to finish
        return s, after

    s, after = asyncio.run(_in_session(tmp_path, body))
    assert after.result.ok
    nb = _valid(s.notebook_path)
    first = nb.cells[0]
    assert first.metadata["kernel_agent"]["status"] == "error"
    assert any(o.get("ename") == "KeyboardInterrupt" for o in first.outputs)


def test_read_notebook_and_cells(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        await s.run_cell("print('hello')")
        await s.run_cell("raise ValueError('bad')")
        return s.notebook_text(), s.notebook_text(clean=True), s.cell_text(-1)

    full, clean, last = asyncio.run(_in_session(tmp_path, body))
    assert "[0] In [1] ok" in full and "hello" in full and "[1] In [2] error" in full
    assert "ValueError" not in clean and "hello" in clean
    assert "ValueError: bad" in last


def test_file_tools_stay_in_the_work_dir(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside")

    async def body(s: Session) -> Any:
        await s.write_file("sub/a.txt", "héllo")
        await s.run_cell("import os\nos.symlink('..', 'up')\nos.symlink('/etc/hostname', 'host')")
        # the work dir is the kernel's own and goes with it: check while it runs
        assert await s.read_file("sub/a.txt") == "héllo"
        (tmp_path / "work" / "data.csv").write_text("a\n")
        listed = {e.path: e.kind for e in await s.list_files()}
        assert listed["sub/a.txt"] == "file" and listed["up"] == "link"
        for bad in ("../secret.txt", "/etc/hostname", "up/secret.txt", "host"):
            with pytest.raises(UnsafePath):
                await s.read_file(bad)
        with pytest.raises(UnsafePath):
            await s.write_file("up/planted.txt", "x")
        with pytest.raises(UnsafePath):
            await s.write_file("/tmp/x.txt", "x")
        with pytest.raises(ConfigError, match="no such file"):
            await s.read_file("missing.txt")
        return s

    asyncio.run(_in_session(tmp_path, body))
    assert not (tmp_path / "planted.txt").exists() and not (tmp_path / "work" / "sub").exists()


def test_verify_and_export(tmp_path: Path) -> None:
    async def body(s: Session) -> Any:
        await s.run_cell("n = sum(range(10))\nprint(n)")
        await s.run_cell("1/0")
        report = await s.verify()
        html = await s.export("html")
        md = await s.export("markdown", clean=False)
        return s, report, html, md

    s, report, html, md = asyncio.run(_in_session(tmp_path, body))
    assert report.verdict == "reproduced", report.summary()
    clean = _valid(report.path)
    assert clean.metadata["kernel_agent"]["verify"]["verdict"] == "reproduced"
    assert [c.source for c in clean.cells if c.cell_type == "code"] == [
        "n = sum(range(10))\nprint(n)"
    ]
    assert (
        json.loads(s.notebook_json())["metadata"]["kernel_agent"]["verify"]["verdict"]
        == "reproduced"
    )
    assert html.suffix == ".html" and "45" in html.read_text()
    assert md.suffix == ".md" and "1/0" in md.read_text()


# ------------------------------------------------------------------ pure units
def _png(width: int, height: int) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_bound_image_keeps_small_and_downscales_big() -> None:
    small = _png(100, 50)
    same = bound_image("image/png", small)
    assert same is not None and same.data == small and not same.scaled
    big = bound_image("image/png", _png(3000, 1500), max_side=800)
    assert big is not None and big.scaled and (big.width, big.height) == (800, 400)
    assert bound_image("image/png", "bm90IGFuIGltYWdl") is None
    assert from_data_url("data:image/png;base64,QUJD") == ("image/png", "QUJD")
    assert from_data_url("https://example.com/x.png") is None


def test_an_agent_run_keeps_the_sessions_earlier_state_across_a_restart(
    tmp_path: Path, fake_llm: Any
) -> None:
    # the run works in the session's own state: a kernel that dies mid-run comes back with
    # the session's earlier cells replayed, and a later restart still replays them
    from fake_openai import run_cell, scripted_settings, text

    fake_llm.enqueue(
        run_cell("import os\nos.kill(os.getpid(), 9)"), run_cell("print(kept)"), text("kept: 7.")
    )

    async def body(s: Session) -> Any:
        await s.run_cell("kept = 7", provenance={"source": "test"})
        events = [e async for e in s.run_task("show kept", settings=scripted_settings(
            fake_llm, tmp_path, cwd=tmp_path / "work", rebuild_max_cell_s=5.0),
            provenance={"source": "run"})]  # fmt: skip
        note = await s.restart()
        after = await s.run_cell("print(kept)")
        return events, note, after

    events, note, after = asyncio.run(_in_session(tmp_path, body, rebuild_max_cell_s=5.0))
    finished = [e.result for e in events if type(e).__name__ == "CellFinished"]
    assert [r.status for r in finished] == ["died", "ok"]
    assert finished[1].outputs[0]["text"] == "7\n"  # replayed after the kernel died
    assert "survived: kept" in note and after.result.outputs[0]["text"] == "7\n"
    nb = _valid(tmp_path / "nb" / "t.ipynb")  # one notebook: no second transcript
    meta = [c.metadata["kernel_agent"] for c in nb.cells if c.cell_type == "code"]
    assert [m.get("source") for m in meta if not m.get("replay")] == [
        "test", "run", "run", None, None,
    ]  # fmt: skip
    assert meta[1]["task"] == "show kept" and nb.metadata["kernel_agent"]["runs"][0]["task"]
