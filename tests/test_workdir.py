"""An ended session's files: the members of its archive, read-only and bounded."""

from __future__ import annotations

import asyncio
import os
import zipfile
from pathlib import Path

import pytest

from kernel_agent.edges.delivery import deliver
from kernel_agent.errors import ConfigError
from kernel_agent.workdir import ArchiveWorkDir


def test_an_archive_work_dir_lists_reads_and_refuses(tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "out").mkdir(parents=True)
    (work / "out" / "a.csv").write_text("a\n1\n")
    (work / "big.bin").write_bytes(b"x" * 5000)
    found = deliver(work, tmp_path / "nb.ipynb")
    assert found.archive is not None
    files = ArchiveWorkDir(found.archive, max_open_bytes=4000)

    async def go() -> None:
        assert [(e.path, e.kind, e.size) for e in await files.list()] == [
            ("big.bin", "file", 5000),
            ("out/a.csv", "file", 4),
        ]
        assert [e.path for e in await files.list(max_depth=1)] == ["big.bin"]
        assert await files.read("out/a.csv", limit=100) == b"a\n1\n"
        fd, size = await files.open("out/a.csv")
        with os.fdopen(fd, "rb") as fh:
            assert (fh.read(), size) == (b"a\n1\n", 4)
        with pytest.raises(ConfigError, match="larger than"):
            await files.read("big.bin", limit=1000)
        with pytest.raises(ConfigError, match="download bound"):
            await files.open("big.bin")
        with pytest.raises(ConfigError, match="is a directory"):
            await files.read("out", limit=100)
        with pytest.raises(ConfigError, match="no such file"):
            await files.read("../w/out/a.csv", limit=100)
        with pytest.raises(ConfigError, match="read-only"):
            await files.delete("out/a.csv")
        assert await files.usage() == 5004
        assert await ArchiveWorkDir(tmp_path / "none.zip").list() == []

    asyncio.run(go())


def test_an_archive_it_did_not_write_shows_only_safe_members(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "work.zip", "w") as zf:
        zf.writestr("../../etc/cron.d/x", "* * * * * root id\n")
        zf.writestr("ok.txt", "ok")
    files = ArchiveWorkDir(tmp_path / "work.zip")
    assert [e.path for e in asyncio.run(files.list())] == ["ok.txt"]
    with pytest.raises(ConfigError, match="no such file"):
        asyncio.run(files.read("../../etc/cron.d/x", limit=100))
