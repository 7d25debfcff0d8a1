"""Files reach a remote kernel and come back, over the kernel's own channels.

A real Jupyter Kernel Gateway, and a real Enterprise Gateway with its local process
proxy, on 127.0.0.1 each run in a root dir of their own; the client's
files live elsewhere, so nothing works unless the bytes travel through the kernel
protocol. The agent runs through the real CLI against the scripted model server.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from fake_openai import run_cell, text
from gateway_server import GATEWAYS, running

from kernel_agent.errors import GatewayError
from kernel_agent.executors import gateway_client
from kernel_agent.executors.gateway import AsyncGatewaySession
from kernel_agent.executors.gateway_wire import V1_PROTOCOL
from kernel_agent.remote.transfer import KernelFiles, TransferLimits
from kernel_agent.remote.work import RemoteInput, RemoteWork

pytestmark = pytest.mark.timeout(180)
TOKEN = "remote-files-token"


@pytest.fixture(scope="module", params=GATEWAYS)
def gateway(request, tmp_path_factory):
    with running(request.param, tmp_path_factory.mktemp(f"{request.param}-root"), TOKEN) as gw:
        yield gw


def cli(args, cwd, timeout=150):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def test_cli_file_reaches_the_gateway_kernel_and_its_files_come_back(fake_llm, tmp_path, gateway):
    client, inputs = tmp_path / "client", tmp_path / "inputs"
    client.mkdir()
    inputs.mkdir()
    values = [random.randint(1, 1000) for _ in range(50)]
    data = inputs / "data.csv"
    data.write_text("x\n" + "".join(f"{v}\n" for v in values))
    (client / "notes.txt").write_text("from the cwd view\n")
    fake_llm.enqueue(
        run_cell(
            "import os, pandas as pd\n"
            "df = pd.read_csv('data.csv')\n"
            "print(int(df['x'].sum()), open('notes.txt').read().strip())\n"
            "print(os.getcwd())\n"
            "os.makedirs('out', exist_ok=True)\n"
            "df.assign(y=df.x * 2).to_csv('out/doubled.csv', index=False)\n"
            "set_result({'total': int(df['x'].sum())}, files=['out/doubled.csv'])"
        ),
        text("done"),
    )
    nb = client / "run.ipynb"
    proc = cli(
        [
            "run",
            "--format",
            "json",
            "--notebook",
            str(nb),
            "--base-url",
            fake_llm.base_url,
            "--model",
            "m",
            "--api-key",
            "k",
            "--gateway-url",
            gateway.url,
            "--gateway-token",
            TOKEN,
            "--cwd",
            str(client),
            "--file",
            str(data),
            "go",
        ],  # fmt: skip
        cwd=client,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["result"] == {"total": sum(values)}
    cell = nbformat.read(nb, as_version=4).cells[2]
    printed = "".join(o.get("text", "") for o in cell.outputs).splitlines()
    assert printed[0] == f"{sum(values)} from the cwd view"
    kernel_cwd = Path(printed[1])
    assert client not in (kernel_cwd, *kernel_cwd.parents)
    assert gateway.workdir not in (kernel_cwd, *kernel_cwd.parents)
    # the work dir's new file came back in the archive, the declared data file loose and flat
    with zipfile.ZipFile(client / "run_files" / "work.zip") as zf:
        doubled = zf.read("out/doubled.csv")
        assert "data.csv" not in zf.namelist()  # the inputs are not delivered back
    assert doubled.decode().splitlines()[1:] == [f"{v},{2 * v}" for v in values]
    assert (client / "run_files" / "result" / "doubled.csv").read_bytes() == doubled
    assert out["files"] == [str(client / "run_files" / "result" / "doubled.csv")]
    # the gateway's own dir got nothing
    assert not (gateway.workdir / "data.csv").exists()
    # the model is told where the kernel runs, and the data preview saw the uploaded file
    assert f"working directory `{kernel_cwd}`" in fake_llm.requests[0]["messages"][0]["content"]
    preview = fake_llm.requests[0]["messages"][1]["content"]
    assert "data.csv" in preview and "50 rows x 1 columns" in preview and "notes.txt" in preview


async def _session(gateway, inputs=(), **work_kw):
    session = AsyncGatewaySession(gateway.url, TOKEN, "python3")
    session.files = RemoteWork(session, list(inputs), **work_kw)
    await session.start()
    return session


@pytest.mark.parametrize(
    ("raw_chunks", "framing"),
    [(True, "v1"), (False, "v1"), (True, "legacy")],
    ids=["raw", "base64", "raw-legacy-framing"],
)
def test_a_big_file_streams_in_chunks_both_ways_and_survives_a_restart(
    tmp_path, gateway, raw_chunks, framing, monkeypatch
):
    if framing == "legacy":  # JSON text frames; a message with buffers comes as a binary frame
        monkeypatch.setattr(gateway_client, "OFFERED_SUBPROTOCOLS", [])
    blob = tmp_path / "blob.bin"
    blob.write_bytes(random.randbytes(3 * 1024 * 1024 + 17))
    limits = TransferLimits(put_chunk=256 * 1024, get_chunk=512 * 1024, raw_chunks=raw_chunks)

    async def go():
        session = await _session(gateway, [RemoteInput(blob, "blob.bin")], transfer=limits)
        try:
            assert session._channels.protocol == (None if framing == "legacy" else V1_PROTOCOL)
            work = session.files.work
            r = await session.execute(
                "import hashlib, os\n"
                "b = open('blob.bin', 'rb').read()\n"
                "print(len(b), hashlib.sha256(b).hexdigest())\n"
                "open('copy.bin', 'wb').write(b[::-1])"
            )
            await session.restart()  # a fresh process: back in the same work dir
            r2 = await session.execute("import os\nprint(os.getcwd(), os.listdir('.'))")
            got = await session.files.deliver(tmp_path / "nb.ipynb")
            pulled = []  # delivered again: the unchanged file is taken from the archive
            download = session.files.kernel.download
            session.files.kernel.download = lambda name, *a, **kw: (  # type: ignore[method-assign]
                pulled.append(name) or download(name, *a, **kw)
            )
            again = await session.files.deliver(tmp_path / "nb.ipynb")
            assert pulled == [] and again.members == ["copy.bin"] and not again.changed
            await session.execute(  # the same name and size, one byte changed: pulled again
                "b = open('copy.bin', 'rb').read()\n"
                "open('copy.bin', 'wb').write(bytes([b[0] ^ 1]) + b[1:])"
            )
            changed = await session.files.deliver(tmp_path / "nb.ipynb")
            assert pulled == ["copy.bin"] and changed.changed
            return work, r, r2, got
        finally:
            await session.shutdown()

    work, r, r2, got = asyncio.run(go())
    for _ in range(100):  # shut down for good: the kernel removed its work dir on exit
        if not os.path.exists(work):
            break
        time.sleep(0.05)
    assert not os.path.exists(work)
    import hashlib

    raw = blob.read_bytes()
    assert r.outputs[0].text.split() == [str(len(raw)), hashlib.sha256(raw).hexdigest()]
    assert r2.outputs[0].text.startswith(work + " ")
    assert got.archive == tmp_path / "nb_files" / "work.zip" and got.notes == []
    assert got.members == ["copy.bin"]  # blob.bin is the input, as sent: not delivered back
    with zipfile.ZipFile(got.archive) as zf:
        flipped = raw[::-1]
        assert zf.read("copy.bin") == bytes([flipped[0] ^ 1]) + flipped[1:]


def test_an_upload_the_kernel_stores_wrongly_is_an_error_and_is_removed(tmp_path, gateway):
    src = tmp_path / "in.txt"
    src.write_text("hello")

    async def go():
        session = await _session(gateway)
        try:
            kernel = KernelFiles(session)
            await kernel.digest("x")  # installs the kernel-side module
            await session.execute(
                "import sys\nm = sys.modules['_kernel_agent_files']\n_put = m.put\n"
                "m.put = lambda *a: (_put(*a), m._Json({'size': 5, 'sha256': '0' * 64}))[1]"
            )
            with pytest.raises(GatewayError, match="damaged"):
                await kernel.upload(src, "in.txt")
            r = await session.execute("import os\nprint(os.path.exists('in.txt'))")
            return r.outputs[0].text
        finally:
            await session.shutdown()

    assert asyncio.run(go()) == "False\n"


def test_set_result_refuses_a_bad_name_in_a_remote_kernel(fake_llm, tmp_path, gateway):
    from kernel_agent.agent import Agent
    from kernel_agent.settings import Settings

    fake_llm.enqueue(
        run_cell(
            "try:\n    set_result(1, files=['../../etc/passwd'])\n"
            "except Exception as e:\n    print(type(e).__name__, e)"
        ),
        text("refused"),
    )
    settings = Settings.from_env(
        env={}, base_url=fake_llm.base_url, model="m", api_key="k",
        notebook_dir=tmp_path, gateway_url=gateway.url, gateway_token=TOKEN,
    )  # fmt: skip
    with Agent(settings) as agent:
        result = agent.run_to_end("go")
    assert result.cells[0].outputs[0]["text"].startswith("ToolError set_result: refused")
    assert result.files == [] and result.result is None


def test_inputs_are_chosen_and_bounded(tmp_path):
    from kernel_agent.edges.delivery import DeliveryLimits
    from kernel_agent.errors import ConfigError
    from kernel_agent.remote.work import inputs_from_settings
    from kernel_agent.settings import Settings

    view, other = tmp_path / "view", tmp_path / "other"
    view.mkdir()
    other.mkdir()
    for name, size in [("a.csv", 10), ("b.csv", 30), ("big.bin", 90), (".env", 5)]:
        (view / name).write_bytes(b"x" * size)
    (view / "sub").mkdir()
    os.symlink("/etc/passwd", view / "passwd")
    (other / "a.csv").write_bytes(b"y" * 20)
    limits = DeliveryLimits(max_files=5, max_file_bytes=80, max_total_bytes=60)

    def choose(**kw):
        inputs, notes = inputs_from_settings(Settings.from_env(env={}, **kw), limits)
        return {i.name: i.path for i in inputs}, notes

    # no --cwd: nothing of the current directory is sent
    assert choose() == ({}, [])
    # --file wins over the view's file of the same name; links, dirs and dot files stay
    chosen, notes = choose(cwd=view, files=[other / "a.csv"])
    assert chosen == {"a.csv": other / "a.csv", "b.csv": view / "b.csv"}
    assert notes == ["big.bin (90 bytes) is over the size bound"]
    with pytest.raises(ConfigError, match="no such file"):
        choose(files=[other / "missing.csv"])
    with pytest.raises(ConfigError, match="at most 80 bytes a file"):
        choose(files=[view / "big.bin"])
    with pytest.raises(ConfigError, match="refusing to send"):
        choose(cwd=Path("/etc"))
