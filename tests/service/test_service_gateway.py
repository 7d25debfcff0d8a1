"""``kernel-agent serve --gateway-url``: sessions from a warm pool of gateway kernels, whose
files travel over the kernel's channels (upload → execute → download → run).

Real parts only: a Jupyter Kernel Gateway on 127.0.0.1 in a root dir of its own, the real
server subprocess (uvicorn), raw HTTP, and the scripted model server for the agent run. The
gateway's kernels share no directory with the server: a file is where the test says only if
its bytes went through the kernel protocol.
"""

from __future__ import annotations

import json
import random
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from fake_openai import FakeLLM, run_cell, text
from gateway_server import GATEWAYS, _Gateway, running
from serve_server import TOKEN, serve

pytestmark = pytest.mark.timeout(300)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GW_TOKEN = "svc-gateway-token"

#: the gateway kernel's own id, from its connection file (``kernel-<id>.json``)
KERNEL_ID = (
    "import os\nfrom ipykernel.kernelapp import IPKernelApp\n"
    "print(os.path.basename(IPKernelApp.instance().connection_file)[7:-5])"
)


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module", params=GATEWAYS)
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Gateway]:
    root = tmp_path_factory.mktemp(f"{request.param}-root")
    with running(
        request.param,
        root,
        GW_TOKEN,
        kg_args=("--JupyterWebsocketPersonality.list_kernels=True",),
        eg_args=("--EnterpriseGatewayApp.list_kernels=True",),
    ) as gw:
        yield gw


def gateway_kernels(kg: _Gateway) -> set[str]:
    r = httpx.get(f"{kg.url}/api/kernels", headers={"Authorization": f"token {GW_TOKEN}"})
    r.raise_for_status()
    return {k["id"] for k in r.json()}


def stdout(reply: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in reply["outputs"] if o.get("name") == "stdout")


def wait_pool(http: httpx.Client, size: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while http.get("/healthz").json()["pool_ready"] < size:
        assert time.monotonic() < deadline, "the warm pool did not fill"
        time.sleep(0.1)


def sse_result(body: str) -> dict[str, Any]:
    frames = [dict(line.split(": ", 1) for line in raw.splitlines()) for raw in body.split("\n\n")]
    last = [f for f in frames if f.get("event") == "result"]
    assert last, body[-500:]
    return dict(json.loads(last[-1]["data"]))


def test_gateway_pool_upload_execute_download_run(
    tmp_path: Path, gateway: _Gateway, llm: FakeLLM
) -> None:
    state = tmp_path / "state"
    values = [random.randint(1, 10_000) for _ in range(40)]
    csv = ("x\n" + "".join(f"{v}\n" for v in values)).encode()
    with serve(state, "--gateway-url", gateway.url, "--gateway-token", GW_TOKEN,
               "--pool", "1", "--max-file-mb", "0.01", "--model", "gpt-fake",
               "--base-url", llm.base_url, "--protocol", "tools") as srv:  # fmt: skip
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
            wait_pool(http, 1)
            before = gateway_kernels(gateway)
            assert len(before) == 1  # the pool's kernel, started before any session
            r = http.post("/v1/sessions", json={})
            assert r.status_code == 201, r.text
            sid = r.json()["id"]
            assert r.json()["sandbox"].startswith("remote kernel on")
            run = http.post(f"/v1/sessions/{sid}/execute", json={"code": KERNEL_ID}).json()
            assert stdout(run).strip() in before, (run, before)  # the session took the pooled one
            base = f"/v1/sessions/{sid}/files"

            # upload -> execute (the cell reads the upload) -> download (a file the cell wrote)
            r = http.put(f"{base}/data/in.csv", content=csv)
            assert r.status_code == 201 and r.json() == {"path": "data/in.csv", "size": len(csv)}
            code = (
                "import os\nrows = open('data/in.csv').read().split()[1:]\n"
                "print(sum(map(int, rows)))\nos.makedirs('out', exist_ok=True)\n"
                "open('out/total.txt', 'w').write(f'total={sum(map(int, rows))}')\n"
                "print(os.getcwd())"
            )
            reply = http.post(f"/v1/sessions/{sid}/execute", json={"code": code}).json()
            total, kernel_cwd = stdout(reply).split()
            assert int(total) == sum(values), reply
            # the kernel works in a dir of its own, neither the server's state nor the gateway's
            assert not kernel_cwd.startswith((str(state), str(gateway.workdir)))
            assert not [p for p in state.rglob("in.csv")]  # never on the server's disk
            listed = {f["path"]: f for f in http.get(base).json()["files"]}
            assert listed["data/in.csv"]["size"] == len(csv), listed
            assert listed["out/total.txt"]["kind"] == "file"
            got = http.get(f"{base}/out/total.txt")
            assert got.status_code == 200 and got.content == f"total={sum(values)}".encode()

            # an agent run in the same kernel: reads the upload, writes a file we download
            llm.enqueue(
                run_cell(
                    "import pandas as pd\ndf = pd.read_csv('data/in.csv')\n"
                    "df.assign(y=df.x * 3).to_csv('out/tripled.csv', index=False)\n"
                    "print(int(df.x.max()))"
                ),
                text("Done: tripled."),
            )
            r = http.post(f"/v1/sessions/{sid}/runs", json={"task": "triple x"})
            result = sse_result(r.text)
            assert result["status"] == "finished", result
            assert result["result"]["answer"] == "Done: tripled."
            tripled = http.get(f"{base}/out/tripled.csv").text.split()
            assert tripled[0] == "x,y" and [int(v.split(",")[1]) for v in tripled[1:]] == [
                3 * v for v in values
            ]

            # what a remote work dir refuses: escapes, dot names, links, size; delete works
            for bad in ("%2e%2e/x", "data/%2e%2e/%2e%2e/x", "%2Fetc%2Fpasswd", ".bashrc"):
                assert http.put(f"{base}/{bad}", content=b"x").status_code == 400, bad
                assert http.get(f"{base}/{bad}").status_code in (400, 404), bad
            plant = "import os; os.symlink('/etc/passwd', 'pw')"
            assert (
                http.post(f"/v1/sessions/{sid}/execute", json={"code": plant}).json()["status"]
                == "ok"
            )
            r = http.get(f"{base}/pw")
            assert r.status_code == 400 and "symlink" in r.json()["error"]
            assert http.put(f"{base}/big.bin", content=b"x" * 20_000).status_code == 413
            # streamed without a length: refused mid-way, the kernel's partial file removed
            chunks = iter([b"y" * 8000] * 3)
            assert http.put(f"{base}/big2.bin", content=chunks).status_code == 413
            left = http.post(
                f"/v1/sessions/{sid}/execute",
                json={"code": "import os; print(sorted(os.listdir('.')))"},
            ).json()
            assert "big" not in stdout(left) and "part" not in stdout(left), stdout(left)
            names = {f["path"] for f in http.get(base).json()["files"]}
            assert "big.bin" not in names and not any(n.startswith(".") for n in names), names
            assert http.delete(f"{base}/data/in.csv").status_code == 204
            assert http.get(f"{base}/data/in.csv").status_code == 404
            assert http.delete(f"{base}/data/in.csv").status_code == 404
            gone = http.post(
                f"/v1/sessions/{sid}/execute",
                json={"code": "import os; print(os.path.exists('data/in.csv'))"},
            )
            assert stdout(gone.json()) == "False\n"
            wait_pool(http, 1)  # refilled with a fresh gateway kernel
            assert len(gateway_kernels(gateway)) == 2
        assert srv.stop() == 0, srv.log
    # finalised on SIGTERM: the kernel's files were pulled beside the notebook, checked
    with zipfile.ZipFile(state / "sessions" / sid / "notebook_files" / "work.zip") as zf:
        assert zf.read("out/total.txt").decode() == f"total={sum(values)}"
        assert "out/tripled.csv" in zf.namelist()
        assert "pw" not in zf.namelist()  # a link is not a file
    assert gateway_kernels(gateway) == set()  # every kernel, pooled or not, was shut down


def test_a_session_takes_the_pooled_kernel_and_the_next_starts_its_own(
    tmp_path: Path, gateway: _Gateway
) -> None:
    """The pooled session's kernel was started before the request; a second session in the
    same second finds the pool empty and starts its own (both work). How much faster the
    pooled start is belongs to a benchmark: a timed assert here failed in a local CI run
    that shared the 2 cores with an eval (2026-12-07)."""
    with serve(tmp_path / "state", "--gateway-url", gateway.url, "--gateway-token", GW_TOKEN,
               "--pool", "1") as srv:  # fmt: skip
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
            wait_pool(http, 1)
            pooled = gateway_kernels(gateway)
            started = [http.post("/v1/sessions", json={}) for _ in range(2)]
            assert all(r.status_code == 201 for r in started), [r.text for r in started]
            first, second = (r.json()["id"] for r in started)
            ids = {}
            for sid in (first, second):
                out = http.post(f"/v1/sessions/{sid}/execute", json={"code": KERNEL_ID}).json()
                ids[sid] = stdout(out).strip()
            assert ids[first] in pooled and ids[second] not in pooled, (ids, pooled)
        assert srv.stop() == 0, srv.log
