"""``kernel-agent mcp --gateway-url``: the file tools reach the gateway kernel's own work dir.

The official MCP SDK's client over stdio, a real server subprocess, and a real Jupyter
Kernel Gateway on 127.0.0.1 in a root dir of its own: ``write_file`` → ``run_cell``
reading it → ``read_file`` of what the cell wrote, with nothing on the server's disk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from gateway_server import GATEWAYS, _Gateway, running  # noqa: E402
from test_mcp import ok, refused, stdio_client, text_of  # noqa: E402

pytestmark = pytest.mark.timeout(180)
GW_TOKEN = "mcp-gateway-token"


@pytest.fixture(scope="module", params=GATEWAYS)
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Gateway]:
    root = tmp_path_factory.mktemp(f"{request.param}-root")
    with running(request.param, root, GW_TOKEN) as gw:
        yield gw


def test_file_tools_reach_the_gateway_kernel(tmp_path: Path, gateway: _Gateway) -> None:
    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        args = ("--gateway-url", gateway.url, "--gateway-token", GW_TOKEN)
        async with stdio_client(tmp_path, *args) as c:
            seen["write"] = await ok(
                c, "write_file", {"path": "data/in.csv", "content": "x\n3\n4\n"}
            )
            seen["run"] = await ok(
                c,
                "run_cell",
                {
                    "code": "import os\nrows = open('data/in.csv').read().split()[1:]\n"
                    "open('out.txt', 'w').write(f'sum={sum(map(int, rows))}')\n"
                    "print(os.getcwd())"
                },
            )
            seen["read"] = await ok(c, "read_file", {"path": "out.txt"})
            seen["files"] = await ok(c, "list_files")
            seen["dot"] = await refused(c, "write_file", {"path": ".bashrc", "content": "x"})
            seen["up"] = await refused(c, "read_file", {"path": "../etc/passwd"})
            seen["missing"] = await refused(c, "read_file", {"path": "nope.txt"})
        return seen

    seen = asyncio.run(main())
    assert text_of(seen["read"]) == "sum=7"
    kernel_cwd = text_of(seen["run"])
    assert str(tmp_path) not in kernel_cwd and str(gateway.workdir) not in kernel_cwd
    listed = {f["path"]: f for f in seen["files"].structured_content["files"]}
    assert listed["data/in.csv"]["size"] == 6 and listed["out.txt"]["kind"] == "file"
    assert "dot name" in seen["dot"] and "no such file" in seen["missing"]
    # the server's own disk never held the files: they went over the kernel's channels
    assert not [p for p in tmp_path.rglob("*") if p.name in ("in.csv", "out.txt")]
