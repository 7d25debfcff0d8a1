"""A :class:`Session` on a gateway kernel: its file tools reach the kernel's own work dir, and a
restart or a death is rebuilt by replaying the cells, whose files survive in that work dir.

A real Jupyter Kernel Gateway on 127.0.0.1 in a root dir of its own; the session's
notebook and the test's files live elsewhere.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_server import GATEWAYS, _Gateway, running

from kernel_agent.errors import ConfigError, UnsafePath
from kernel_agent.remote.transfer import TransferLimits
from kernel_agent.session import Session
from kernel_agent.settings import Settings
from kernel_agent.workdir import RemoteWorkDir

pytestmark = pytest.mark.timeout(180)
GW_TOKEN = "session-gateway-token"


@pytest.fixture(scope="module", params=GATEWAYS)
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Gateway]:
    root = tmp_path_factory.mktemp(f"{request.param}-root")
    with running(request.param, root, GW_TOKEN) as gw:
        yield gw


def in_session(tmp_path: Path, kg: _Gateway, body: Any) -> Any:
    view = tmp_path / "view"
    view.mkdir()
    settings = Settings.from_env(
        env={}, cwd=view, gateway_url=kg.url, gateway_token=GW_TOKEN, cell_timeout=60
    )

    async def main() -> Any:
        async with Session(settings, notebook=tmp_path / "nb" / "s.ipynb") as s:
            return await body(s)

    return asyncio.run(main())


def test_files_and_state_survive_a_restart_and_a_death(tmp_path: Path, gateway: _Gateway):
    values = [random.randint(1, 999) for _ in range(30)]

    async def body(s: Session) -> dict[str, Any]:
        seen: dict[str, Any] = {"files": type(s.files).__name__}
        await s.write_file("in/values.txt", "\n".join(map(str, values)))
        built = await s.run_cell(
            "nums = [int(v) for v in open('in/values.txt').read().split()]\n"
            "total = sum(nums)\nopen('made.txt', 'w').write(str(total))\nprint(total)"
        )
        seen["built"] = built.text
        seen["made"] = await s.read_file("made.txt")
        seen["restart_note"] = await s.restart(rebuild=True)
        seen["after_restart"] = (await s.run_cell("print(total, len(nums))")).text
        died = await s.run_cell("import os; os._exit(1)")
        seen["died"] = (died.result.restarted, died.rebuild_note)
        seen["after_death"] = (await s.run_cell("print(total)")).text
        seen["still_there"] = sorted(e.path for e in await s.list_files())
        for bad in ("../x", "/etc/passwd", ".hidden", "a\x1bb"):
            with pytest.raises(UnsafePath):
                await s.write_file(bad, "x")
        with pytest.raises(ConfigError, match="no such file"):
            await s.read_file("missing.txt")
        with pytest.raises(ConfigError, match="is a directory"):
            await s.read_file("in")
        # an upload whose source fails after two chunks reached the kernel leaves nothing
        remote = s.executor.files  # type: ignore[union-attr]
        remote.kernel.limits = TransferLimits(put_chunk=1000)

        async def failing() -> AsyncIterator[bytes]:
            yield b"z" * 2500
            raise RuntimeError("the client went away")

        with pytest.raises(RuntimeError, match="went away"):
            await s.upload("partial.bin", failing())
        seen["after_abort"] = (await s.run_cell("import os; print(sorted(os.listdir('.')))")).text
        await s.delete_file("made.txt")
        seen["deleted"] = "made.txt" not in {e.path for e in await s.list_files()}
        seen["usage"] = await s.disk_usage()
        return seen

    seen = in_session(tmp_path, gateway, body)
    total = sum(values)
    assert seen["files"] == RemoteWorkDir.__name__
    assert str(total) in seen["built"] and seen["made"] == str(total)
    assert "rebuilt by replaying 1" in seen["restart_note"], seen["restart_note"]
    assert f"{total} 30" in seen["after_restart"]
    restarted, note = seen["died"]
    assert restarted and "rebuilt by replaying" in note, note
    assert str(total) in seen["after_death"]  # the replay read the upload again: it survived
    assert "in/values.txt" in seen["still_there"] and "made.txt" in seen["still_there"]
    assert "partial" not in seen["after_abort"] and "in" in seen["after_abort"]
    assert seen["deleted"] and seen["usage"] == len("\n".join(map(str, values)))
    assert not list(tmp_path.rglob("values.txt"))  # never on this side's disk
