"""AsyncNotebookExecutor on a real JupyterLab with collaboration: the notebook's own kernel,
cells and outputs in the shared document, a user's edit kept, a kernel restart, a
vanished kernel, a server that goes away."""

from __future__ import annotations

import asyncio
import time

import pytest
from lab_server import LabServer, as_the_user, write_notebook

from kernel_agent.errors import AuthRefused, GatewayError, JupyterError, KernelDied, Unreachable
from kernel_agent.jupyter.executor import AsyncNotebookExecutor
from kernel_agent.jupyter.server import JupyterServer
from kernel_agent.jupyter.shared_doc import SharedNotebook

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def lab(tmp_path):
    server = LabServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def executor(lab: LabServer, path: str = "work/a.ipynb", token: str | None = None):
    return AsyncNotebookExecutor(JupyterServer(lab.url, token or lab.token, path))


async def replica(lab: LabServer, path: str) -> SharedNotebook:
    """Another client of the same document (what a browser tab is)."""
    server = JupyterServer(lab.url, lab.token, path)
    doc = SharedNotebook(await server.room_url(), server.headers)
    await doc.open()
    return doc


async def until(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_cells_run_in_the_notebooks_own_kernel_and_land_in_its_document(lab):
    write_notebook(lab.root / "work" / "a.ipynb", "x = 41")
    # the user opened it in JupyterLab and ran their cell: the notebook's kernel holds x
    kernel_id = as_the_user(lab, "work/a.ipynb", "x = 41")

    async def main():
        agent = executor(lab)
        await agent.start()
        assert agent.kernel_id == kernel_id  # the session's kernel, not a new one
        other = await replica(lab, "work/a.ipynb")
        result = await agent.execute(
            "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint(x + 1)",
            timeout=30,
        )
        await agent.shutdown()
        await asyncio.sleep(0.5)
        final = other.cells()
        await other.close()
        return result, final

    result, final = asyncio.run(main())
    assert result.status == "ok"
    assert result.outputs[0]["text"] == "first\n42\n"  # x came from the user's cell
    mine = [c for c in final if c.get("metadata", {}).get("kernel_agent")]
    assert len(mine) == 1 and final[0]["source"] == "x = 41"
    cell = mine[0]
    assert (
        cell["source"].startswith("import time")
        and cell["execution_count"] == result.execution_count
    )
    assert cell["outputs"][0]["text"] == "first\n42\n"
    # the kernel is the user's: still running after we let go
    assert lab.session_kernel("work/a.ipynb") == kernel_id
    assert lab.api("GET", f"/api/kernels/{kernel_id}")["id"] == kernel_id


def test_outputs_stream_into_the_document_while_the_cell_runs(lab):
    write_notebook(lab.root / "s.ipynb")

    async def main():
        agent = executor(lab, "s.ipynb")
        await agent.start()
        other = await replica(lab, "s.ipynb")
        task = asyncio.create_task(
            agent.execute(
                "import time\nprint('tick', flush=True)\ntime.sleep(3)\nprint('tock')", timeout=30
            )
        )

        def running_with_tick():
            cells = [c for c in other.cells() if c.get("metadata", {}).get("kernel_agent")]
            if not cells:
                return None
            ycell = next(y for y in other.notebook.ycells if y.get("id") == cells[-1]["id"])
            outs = cells[-1].get("outputs") or []
            text = "".join(str(o.get("text", "")) for o in outs)
            return (ycell.get("execution_state"), text) if "tick" in text else None

        mid = await until(running_with_tick)
        result = await task
        await agent.shutdown()
        await other.close()
        return mid, result

    mid, result = asyncio.run(main())
    assert mid == ("running", "tick\n")  # seen mid-cell: [*] and the first line
    assert result.status == "ok" and "tock" in result.outputs[0]["text"]


def test_a_users_concurrent_edit_is_kept(lab):
    write_notebook(lab.root / "e.ipynb", "a = 1", "b = 2")

    async def main():
        agent = executor(lab, "e.ipynb")
        await agent.start()
        user = await replica(lab, "e.ipynb")
        task = asyncio.create_task(
            agent.execute("import time\ntime.sleep(2)\nprint('agent')", timeout=30)
        )
        await until(lambda: len(user.cells()) == 3)
        # while the agent's cell runs, the user types into their first cell and adds one
        source = user.notebook.ycells[0]["source"]  # a Y.Text: typing is an insert
        source += "  # edited by the user"
        user.notebook.append_cell(
            {"cell_type": "markdown", "source": "user's note", "metadata": {}}
        )
        result = await task
        await agent.shutdown()
        await asyncio.sleep(1.0)
        check = await replica(lab, "e.ipynb")
        cells = check.cells()
        await check.close()
        await user.close()
        return result, cells

    result, cells = asyncio.run(main())
    assert result.status == "ok"
    sources = [c["source"] for c in cells]
    assert sources[0] == "a = 1  # edited by the user" and sources[1] == "b = 2"
    assert "user's note" in sources
    agent_cells = [c for c in cells if c.get("metadata", {}).get("kernel_agent")]
    assert agent_cells[0]["outputs"][0]["text"] == "agent\n"


def test_probes_and_silent_code_never_reach_the_document(lab):
    write_notebook(lab.root / "p.ipynb")

    async def main():
        agent = executor(lab, "p.ipynb")
        await agent.start()
        await agent.inject("_ka_helper = 1")
        probe = await agent.execute("", user_expressions={"v": "1 + 1"})
        cells = agent.doc.cells()
        await agent.shutdown()
        return probe, cells

    probe, cells = asyncio.run(main())
    assert probe.user_expressions["v"]["data"]["text/plain"] == "2"
    assert all(not c.get("metadata", {}).get("kernel_agent") for c in cells)


def test_a_kernel_restart_mid_cell_ends_it_and_the_next_runs(lab):
    write_notebook(lab.root / "r.ipynb")
    kernel_id = lab.open_session("r.ipynb")

    async def main():
        agent = executor(lab, "r.ipynb")
        await agent.start()
        await agent.execute("kept = 5")
        task = asyncio.create_task(agent.execute("import time\ntime.sleep(20)", timeout=60))
        await asyncio.sleep(1.5)
        # the user presses Kernel > Restart in JupyterLab
        await asyncio.to_thread(lab.api, "POST", f"/api/kernels/{kernel_id}/restart", {})
        died = await task
        after = await agent.execute("print('kept' in dir())")
        await agent.shutdown()
        return died, after

    died, after = asyncio.run(main())
    assert died.status == "died"
    assert after.status == "ok" and after.outputs[0]["text"] == "False\n"  # a fresh kernel
    assert lab.session_kernel("r.ipynb") == kernel_id  # the same kernel, restarted


def test_a_restart_whose_statuses_never_reach_us_is_still_a_death(lab):
    # Under load the new kernel's "starting" can go out before the server's iopub link
    # rejoins it; here no parentless status reaches the inbox at all. The executor
    # still learns of the restart: its next follow-up is answered by another process.
    write_notebook(lab.root / "q.ipynb")
    kernel_id = lab.open_session("q.ipynb")

    async def main():
        agent = executor(lab, "q.ipynb")
        await agent.start()
        assert agent._channels is not None
        agent._channels.death_states = ()
        await agent.execute("kept = 5")
        task = asyncio.create_task(agent.execute("import time\ntime.sleep(30)", timeout=90))
        await asyncio.sleep(1.5)
        await asyncio.to_thread(lab.api, "POST", f"/api/kernels/{kernel_id}/restart", {})
        died = await task
        after = await agent.execute("print('kept' in dir())")
        await agent.shutdown()
        return died, after

    died, after = asyncio.run(main())
    assert died.status == "died", died.error
    assert "new kernel process" in died.error.evalue
    assert after.status == "ok" and after.outputs[0]["text"] == "False\n"


def test_a_kernel_shut_down_on_the_server_is_not_replaced_by_one_of_ours(lab):
    write_notebook(lab.root / "k.ipynb")
    kernel_id = lab.open_session("k.ipynb")

    async def main():
        agent = executor(lab, "k.ipynb")
        await agent.start()
        await asyncio.to_thread(lab.api, "DELETE", f"/api/kernels/{kernel_id}")
        try:
            with pytest.raises(KernelDied, match="gone from the Jupyter server"):
                await agent.execute("1", timeout=30)
        finally:
            await agent.shutdown()

    asyncio.run(main())
    assert lab.api("GET", "/api/kernels") == []  # nothing of ours was started


def test_the_server_going_away_mid_cell_is_a_one_line_error(lab):
    write_notebook(lab.root / "g.ipynb")

    async def main():
        agent = executor(lab, "g.ipynb")
        await agent.start()
        task = asyncio.create_task(agent.execute("import time\ntime.sleep(30)", timeout=60))
        await asyncio.sleep(1.0)
        lab.kill()
        try:
            with pytest.raises(GatewayError) as info:
                await task
        finally:
            await agent.shutdown()
        return info.value

    started = time.monotonic()
    error = asyncio.run(main())
    assert time.monotonic() - started < 40
    assert "\n" not in str(error) and str(error)


@pytest.mark.parametrize(
    ("path", "token", "error", "words"),
    [
        ("nope.ipynb", None, JupyterError, "has no notebook 'nope.ipynb'"),
        ("b.ipynb", "wrong-token", AuthRefused, "refused a wrong token"),
    ],
)
def test_a_bad_path_or_token_is_one_clear_line(lab, path, token, error, words):
    write_notebook(lab.root / "b.ipynb")

    async def main():
        agent = executor(lab, path, token)
        try:
            await agent.start()
        finally:
            await agent.shutdown()

    with pytest.raises(error, match=words) as info:
        asyncio.run(main())
    assert "\n" not in str(info.value)


def test_no_server_there_is_unreachable(tmp_path):
    from gateway_server import free_port

    agent = AsyncNotebookExecutor(JupyterServer(f"http://127.0.0.1:{free_port()}", "t", "a.ipynb"))
    with pytest.raises(Unreachable, match="cannot reach the Jupyter server"):
        asyncio.run(agent.start())
