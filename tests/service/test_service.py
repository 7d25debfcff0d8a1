"""``kernel-agent serve`` end to end: a real server subprocess, real sandboxed kernels, raw HTTP.

Agent runs use the scripted model server (``fake_openai.FakeLLM``) through the real
openai client inside the server.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, text
from serve_server import TOKEN, Server, serve

pytestmark = pytest.mark.timeout(240)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Server]:
    state = tmp_path_factory.mktemp("serve-state")
    with serve(state, "--pool", "1", "--max-file-mb", "0.01", "--model", "gpt-fake",
               "--base-url", llm.base_url, "--protocol", "tools") as srv:  # fmt: skip
        yield srv


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        yield client


def new_session(http: httpx.Client, **body: Any) -> str:
    r = http.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def stdout(reply: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in reply["outputs"] if o.get("name") == "stdout")


def sse_frames(body: str) -> list[tuple[str, dict[str, Any]]]:
    frames = []
    for raw in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in raw.splitlines())
        frames.append((lines["event"], json.loads(lines["data"])))
    return frames


def test_auth_is_required(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anon:
        assert anon.get("/v1/sessions").status_code == 401
        assert anon.post("/v1/sessions", json={}).status_code == 401
        bad = anon.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN[:-1]}x"})
        assert bad.status_code == 401 and "bearer token" in bad.json()["error"]
        assert anon.get("/openapi.json").status_code == 401
        page = anon.get("/")
        assert page.status_code == 401 and "<form" in page.text  # the login form
        assert anon.get("/healthz").status_code == 200
        # ?token= logs in: a cookie, then the page and the API answer
        r = anon.get(f"/?token={TOKEN}", follow_redirects=True)
        assert r.status_code == 200 and "sessions" in r.text
        assert anon.get("/v1/sessions").status_code == 200
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as ok:
        schema = ok.get("/openapi.json").json()
        assert "/v1/sessions/{sid}/execute" in schema["paths"]


def test_lifecycle_execute_and_delete(http: httpx.Client) -> None:
    sid = new_session(http)
    assert any(s["id"] == sid for s in http.get("/v1/sessions").json()["sessions"])
    info = http.get(f"/v1/sessions/{sid}").json()
    assert info["status"] == "live" and info["kernel"] == "python3" and info["ttl_left_s"] > 7000

    r = http.post(
        f"/v1/sessions/{sid}/execute", json={"code": "import os\nx = 41\nprint(os.getcwd())"}
    ).json()
    assert r["status"] == "ok" and r["execution_count"] == 1 and r["error"] is None
    work = Path(stdout(r).strip())
    assert work.is_dir()
    r = http.post(f"/v1/sessions/{sid}/execute", json={"code": "x + 1"}).json()
    assert (
        r["outputs"][0]["data"]["text/plain"] == "42"
        and r["outputs"][0]["output_type"] == "execute_result"
    )
    r = http.post(f"/v1/sessions/{sid}/execute", json={"code": "1/0"}).json()
    assert r["status"] == "error" and r["error"]["ename"] == "ZeroDivisionError"
    assert http.post(f"/v1/sessions/{sid}/execute", json={"code": ""}).status_code == 422

    nb = nbformat.reads(http.get(f"/v1/sessions/{sid}/notebook").text, as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells] == ["import os\nx = 41\nprint(os.getcwd())", "x + 1", "1/0"]
    assert nb.cells[0].metadata["kernel_agent"]["source"] == "serve"
    clean = nbformat.reads(
        http.get(f"/v1/sessions/{sid}/notebook", params={"clean": "true"}).text, 4
    )
    assert [c.source for c in clean.cells if c.cell_type == "code"] == [nb.cells[0].source, "x + 1"]
    page = http.get(f"/v1/sessions/{sid}/notebook", params={"format": "html"})
    assert page.status_code == 200 and "ZeroDivisionError" in page.text

    assert http.delete(f"/v1/sessions/{sid}").status_code == 204
    assert http.get(f"/v1/sessions/{sid}").status_code == 404
    assert http.post(f"/v1/sessions/{sid}/execute", json={"code": "x"}).status_code == 404
    assert not work.exists()  # the kernel's work dir went with it


def test_files_upload_download_and_escapes(http: httpx.Client) -> None:
    sid = new_session(http)
    base = f"/v1/sessions/{sid}/files"
    r = http.put(f"{base}/data/in.csv", content=b"a,b\n1,2\n")
    assert r.status_code == 201 and r.json() == {"path": "data/in.csv", "size": 8}
    code = (
        "print(open('data/in.csv').read().strip()); open('out.txt','w').write('made by the kernel')"
    )
    assert (
        stdout(http.post(f"/v1/sessions/{sid}/execute", json={"code": code}).json()) == "a,b\n1,2\n"
    )
    listed = {f["path"]: f for f in http.get(base).json()["files"]}
    assert listed["data/in.csv"]["size"] == 8 and listed["out.txt"]["kind"] == "file"
    assert http.get(f"{base}/out.txt").content == b"made by the kernel"
    # escapes: '..', absolute paths, a planted link out of the work dir, a linked dir
    for bad in ("%2e%2e/x", "data/%2e%2e/%2e%2e/x", "%2Fetc%2Fpasswd"):
        assert http.put(f"{base}/{bad}", content=b"x").status_code == 400, bad
        assert http.get(f"{base}/{bad}").status_code in (400, 404), bad
    plant = "import os; os.symlink('/etc/passwd', 'pw'); os.symlink('/tmp', 'tmpdir')"
    assert http.post(f"/v1/sessions/{sid}/execute", json={"code": plant}).json()["status"] == "ok"
    r = http.get(f"{base}/pw")
    assert r.status_code == 400 and "symlink" in r.json()["error"]
    assert http.put(f"{base}/tmpdir/evil", content=b"x").status_code == 400
    assert not Path("/tmp/evil").exists()
    assert http.put(f"{base}/pw", content=b"replaced").status_code == 201  # the link is replaced...
    assert b"root:" in Path("/etc/passwd").read_bytes()  # ...never followed
    # size limit (the server runs with --max-file-mb 0.01): refused, nothing left behind
    big = http.put(f"{base}/big.bin", content=b"x" * 20_000)
    assert big.status_code == 413
    assert "big.bin" not in {f["path"] for f in http.get(base).json()["files"]}
    assert http.delete(f"{base}/data/in.csv").status_code == 204
    assert http.get(f"{base}/data/in.csv").status_code == 404
    gone = http.post(
        f"/v1/sessions/{sid}/execute",
        json={"code": "import os; print(os.path.exists('data/in.csv'))"},
    )
    assert stdout(gone.json()) == "False\n"
    http.delete(f"/v1/sessions/{sid}")


def test_timeout_and_kernel_death_stay_in_their_session(http: httpx.Client) -> None:
    a, b = new_session(http), new_session(http)
    http.post(f"/v1/sessions/{b}/execute", json={"code": "y = 'b lives'"})
    http.post(f"/v1/sessions/{a}/execute", json={"code": "x = 7"})
    r = http.post(
        f"/v1/sessions/{a}/execute",
        json={"code": "import time\nwhile True: time.sleep(0.05)", "timeout": 1},
    )
    assert r.json()["status"] == "timeout"
    r = http.post(f"/v1/sessions/{a}/execute", json={"code": "import os; os._exit(3)"}).json()
    assert r["status"] == "died" and r["restarted"] is True
    assert (
        stdout(http.post(f"/v1/sessions/{a}/execute", json={"code": "print(x)"}).json()) == "7\n"
    )  # rebuilt
    assert (
        stdout(http.post(f"/v1/sessions/{b}/execute", json={"code": "print(y)"}).json())
        == "b lives\n"
    )
    for sid in (a, b):
        http.delete(f"/v1/sessions/{sid}")


def test_run_streams_events_over_sse_and_outlives_its_client(
    http: httpx.Client, llm: FakeLLM
) -> None:
    sid = new_session(http)
    llm.enqueue(run_cell("total = sum(range(10))\nprint(total)"), text("The total is 45."))
    r = http.post(f"/v1/sessions/{sid}/runs", json={"task": "add 0..9"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    frames = sse_frames(r.text)
    kinds = [d["type"] for e, d in frames if e == "event"]
    assert frames[0][0] == "run" and frames[-1][0] == "result"
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert {"CellStarted", "CellOutput", "CellFinished", "Answer"} <= set(kinds)
    finished = next(d for e, d in frames if e == "event" and d["type"] == "CellFinished")
    assert finished["result"]["outputs"][0]["text"] == "45\n"
    result = frames[-1][1]
    assert result["status"] == "finished" and result["result"]["answer"] == "The total is 45."
    run_id = result["id"]
    assert http.get(f"/v1/sessions/{sid}/runs/{run_id}").json()["status"] == "finished"
    # the run's cells (and its task and answer) are in the session's notebook, and its
    # state in the kernel
    nb = nbformat.reads(http.get(f"/v1/sessions/{sid}/notebook").text, as_version=4)
    cell = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert cell.source.startswith("total =") and cell.metadata["kernel_agent"]["run"] == run_id
    task = next(c for c in nb.cells if c.metadata.get("kernel_agent", {}).get("role") == "task")
    assert nb.cells[-1].source == "The total is 45." and "add 0..9" in task.source
    assert nb.metadata["kernel_agent"]["runs"][-1]["status"] == "ok"
    assert (
        stdout(http.post(f"/v1/sessions/{sid}/execute", json={"code": "print(total)"}).json())
        == "45\n"
    )

    # a client that goes away after the first frame does not stop the run
    llm.enqueue(run_cell("import time; time.sleep(1.5); done = 'yes'"), text("Done."))
    with http.stream("POST", f"/v1/sessions/{sid}/runs", json={"task": "slow"}) as stream:
        first = next(stream.iter_text())
        run_id = json.loads(first.split("data: ", 1)[1].split("\n")[0])["id"]
    deadline = time.monotonic() + 60
    while (state := http.get(f"/v1/sessions/{sid}/runs/{run_id}").json())["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert state["status"] == "finished" and state["result"]["answer"] == "Done."
    assert (
        stdout(http.post(f"/v1/sessions/{sid}/execute", json={"code": "print(done)"}).json())
        == "yes\n"
    )
    # its events can be replayed later
    replay = sse_frames(http.get(f"/v1/sessions/{sid}/runs/{run_id}/events").text)
    assert [d["type"] for e, d in replay if e == "event"][-1] == "RunFinished"
    http.delete(f"/v1/sessions/{sid}")


def test_limits_give_429_and_idle_sessions_are_culled(tmp_path: Path) -> None:
    with serve(tmp_path / "state", "--max-sessions", "2", "--max-concurrent", "1", "--max-queue", "0",
               "--session-ttl", "4") as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as http:  # fmt: skip
        a, b = new_session(http), new_session(http)
        over = http.post("/v1/sessions", json={})
        assert over.status_code == 429 and int(over.headers["retry-after"]) > 0
        http.put(f"/v1/sessions/{b}/files/keep.txt", content=b"kept after cull")
        answers: dict[str, Any] = {}

        def slow() -> None:
            answers["slow"] = http.post(
                f"/v1/sessions/{a}/execute", json={"code": "import time; time.sleep(2)"}
            )

        worker = threading.Thread(target=slow)
        worker.start()
        time.sleep(0.7)
        busy = http.post(f"/v1/sessions/{b}/execute", json={"code": "1"})
        worker.join()
        assert busy.status_code == 429 and "retry-after" in busy.headers, busy.text
        assert answers["slow"].json()["status"] == "ok"
        assert (
            http.post(f"/v1/sessions/{b}/execute", json={"code": "print('b')"}).json()["status"]
            == "ok"
        )
        # no activity for longer than the TTL: both are culled, notebooks and files kept
        deadline = time.monotonic() + 20
        # "ending" while it is finalised; the final status only once all is kept
        while any(
            s["status"] in ("live", "ending") for s in http.get("/v1/sessions").json()["sessions"]
        ):
            assert time.monotonic() < deadline, http.get("/v1/sessions").json()
            time.sleep(0.3)
        info = http.get(f"/v1/sessions/{b}").json()
        assert info["status"] == "expired" and "idle" in info["reason"]
        assert http.post(f"/v1/sessions/{b}/execute", json={"code": "1"}).status_code == 409
        nb = nbformat.reads(http.get(f"/v1/sessions/{b}/notebook").text, as_version=4)
        assert (
            nb.cells[-1].source == "print('b')"
            and "ended" in nb.metadata["kernel_agent"]["session"]
        )
        assert http.get(f"/v1/sessions/{b}/files/keep.txt").content == b"kept after cull"
        assert new_session(http)  # culled sessions no longer count against --max-sessions


def test_sigterm_finalises_and_a_restart_lists_sessions_as_ended(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serve(state) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as http:
        sid = new_session(http)
        http.post(
            f"/v1/sessions/{sid}/execute",
            json={"code": "open('result.txt','w').write('42')\nprint('wrote')"},
        )
        pid = srv.proc.pid
        assert srv.stop() == 0, srv.log
    assert "finalised" in srv.log
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with serve(state) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as http:
        listed = {s["id"]: s for s in http.get("/v1/sessions").json()["sessions"]}
        assert listed[sid]["status"] == "ended" and listed[sid]["reason"] == "server stopped"
        nb = nbformat.reads(http.get(f"/v1/sessions/{sid}/notebook").text, as_version=4)
        assert nb.cells[0].outputs[0]["text"] == "wrote\n"
        assert http.get(f"/v1/sessions/{sid}/notebook", params={"clean": "true"}).status_code == 200
        assert http.get(f"/v1/sessions/{sid}/files/result.txt").content == b"42"
        listed_files = http.get(f"/v1/sessions/{sid}/files").json()["files"]
        assert [(f["path"], f["kind"], f["size"]) for f in listed_files] == [
            ("result.txt", "file", 2)
        ]  # the members of the archive the kernel's files were kept in
        assert http.get(f"/v1/sessions/{sid}/files/missing.txt").status_code == 404
        assert http.post(f"/v1/sessions/{sid}/execute", json={"code": "1"}).status_code == 409
    kept = state / "sessions" / sid
    assert [p.name for p in (kept / "notebook_files").iterdir()] == ["work.zip"]


def test_without_a_token_only_loopback(tmp_path: Path) -> None:
    import subprocess
    import sys

    from crossing import SRC

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("KERNEL_AGENT_SERVE_TOKEN", None)
    proc = subprocess.run([sys.executable, "-m", "kernel_agent", "serve", "--host", "0.0.0.0"],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "loopback only" in proc.stderr
    with serve(tmp_path / "state", token=None) as srv:
        assert httpx.get(f"{srv.url}/v1/sessions", timeout=30).status_code == 200
        assert "no token" in srv.log and "loopback only" in srv.log


def test_a_gateway_session_never_delivers_the_servers_own_dir(tmp_path: Path) -> None:
    """A gateway kernel has no work dir on this host: finalising its session must not copy
    the server's --cwd (which Session.work_dir falls back to) beside the notebook."""
    from gateway_server import KernelGateway

    own = tmp_path / "server-dir"
    own.mkdir()
    (own / "server-secret.txt").write_text("the server's own file")
    kg_root = tmp_path / "kg"
    kg_root.mkdir()
    kg = KernelGateway(kg_root, "svc-gw-token").start()
    state = tmp_path / "state"
    try:
        with serve(state, "--cwd", str(own), "--gateway-url", kg.url,
                   "--gateway-token", "svc-gw-token") as srv:  # fmt: skip
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
                sid = new_session(http)
                reply = http.post(f"/v1/sessions/{sid}/execute", json={"code": "print(6 * 7)"})
                assert stdout(reply.json()) == "42\n", reply.text
            assert srv.stop() == 0, srv.log
    finally:
        kg.stop()
    folder = state / "sessions" / sid
    assert folder.is_dir()
    assert not [p for p in folder.rglob("*") if p.name == "server-secret.txt"]
