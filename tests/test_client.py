"""The typed client (``kernel_agent.client``) against a real server, sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, text
from serve_server import TOKEN, Server, serve

from kernel_agent.client import AsyncClient, Client, SSEDecoder
from kernel_agent.errors import ServiceRefused

pytestmark = pytest.mark.timeout(180)


def test_sse_decoder_splits_frames_across_chunks() -> None:
    d = SSEDecoder()
    assert d.feed('event: run\ndata: {"id"') == []
    assert d.feed(": 1}\n\nevent: event\r\ndata: {}\r\n\r\ndata: x\n") == [
        ("run", '{"id": 1}'),
        ("event", "{}"),
    ]
    assert d.feed("data: y\n\n") == [("message", "x\ny")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, FakeLLM]]:
    with FakeLLM() as llm, serve(tmp_path_factory.mktemp("client-state"), "--model", "gpt-fake",
                                 "--base-url", llm.base_url, "--protocol", "tools") as srv:  # fmt: skip
        yield srv, llm


def test_sync_client_round_trip(server: tuple[Server, FakeLLM], tmp_path: Path) -> None:
    srv, llm = server
    with Client(srv.url, token=TOKEN) as ka:
        s = ka.create_session(ttl=600)
        assert s.status == "live" and s.ttl_s == 600
        assert ka.upload(s.id, "in/data.txt", b"3 4 5") == 5
        cell = ka.execute(
            s.id, "nums = [int(v) for v in open('in/data.txt').read().split()]\nprint(sum(nums))"
        )
        assert cell.ok and cell.stdout == "12\n" and cell.execution_count == 1
        assert [f.path for f in ka.files(s.id) if f.kind == "file"] == ["in/data.txt"]
        assert ka.download(s.id, "in/data.txt") == b"3 4 5"
        llm.enqueue(run_cell("print(max(nums))"), text("The largest is 5."))
        events = list(ka.run(s.id, "what is the largest number?"))
        assert events[0]["type"] == "run" and events[-1]["type"] == "result"
        assert events[-1]["result"]["answer"] == "The largest is 5."
        assert ka.get_run(s.id, events[0]["id"]).status == "finished"
        nb = nbformat.reads(ka.notebook(s.id).decode(), as_version=4)
        assert [c.source for c in nb.cells if c.cell_type == "code"][-1] == "print(max(nums))"
        assert nb.cells[-1].source.endswith("The largest is 5.")  # the run's answer, recorded too
        assert s.id in [x.id for x in ka.sessions()]
        ka.delete_file(s.id, "in/data.txt")
        ka.delete_session(s.id)
        with pytest.raises(ServiceRefused) as err:
            ka.session(s.id)
        assert err.value.status == 404
    with Client(srv.url, token="wrong") as bad, pytest.raises(ServiceRefused) as err:
        bad.sessions()
    assert err.value.status == 401


def test_async_client_round_trip(server: tuple[Server, FakeLLM]) -> None:
    srv, llm = server

    async def main() -> list[str]:
        async with AsyncClient(srv.url, token=TOKEN) as ka:
            s = await ka.create_session()
            cell = await ka.execute(s.id, "import sys; print('async', file=sys.stdout); 1/0")
            assert cell.status == "error" and cell.error["ename"] == "ZeroDivisionError"
            llm.enqueue(run_cell("print('hi')"), text("Said hi."))
            kinds = [e["type"] async for e in ka.run(s.id, "say hi")]
            llm.enqueue(run_cell("print('again')"), text("Again."))
            started = await ka.start_run(s.id, "again")  # returns at once; the run goes on
            assert started.task == "again"
            while (state := await ka.get_run(s.id, started.id)).status == "running":
                await asyncio.sleep(0.1)
            assert state.status == "finished" and state.result["answer"] == "Again."
            await ka.delete_session(s.id)
            return kinds

    kinds = asyncio.run(main())
    assert kinds[0] == "run" and "CellFinished" in kinds and kinds[-1] == "result"
