"""Attacks on the three network surfaces (``serve``, ``mcp --http``, ``observe``), each
reproduced from the review of 2026-11-24 (reviews/surfaces-2026-11-24.md, row numbers
below; redteam K1) against real servers on loopback, real sandboxed kernels and
headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2 as httpx
import nbformat
import pytest
from crossing import SRC
from fake_openai import FakeLLM, run_cell, text
from nbfactory import require_chromium
from serve_server import TOKEN, free_port, serve

from kernel_agent.notebook.chromium import CHROMIUM_FLAGS, find_chromium
from kernel_agent.sandbox import bwrap_problem

pytestmark = pytest.mark.timeout(300)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SANDBOXED = bwrap_problem()[0] is None


def chromium(url: str, *action: str, budget: int = 8000) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               f"--virtual-time-budget={budget}", *action, url]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


def new_session(http: httpx.Client, **body: Any) -> str:
    r = http.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def execute(http: httpx.Client, sid: str, code: str, **extra: Any) -> dict[str, Any]:
    r = http.post(f"/v1/sessions/{sid}/execute", json={"code": code, **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


def stdout(reply: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in reply["outputs"] if o.get("name") == "stdout")


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"


# ------------------------------------------------------------ row 11 / K1: stored XSS
# The script the review used: list every session, run code in each, mark the page.
XSS = """
from IPython.display import HTML, display
display(HTML('''<b>a table</b><script>
document.title = ['PWNED', 'TITLE'].join('-');
document.body.insertAdjacentHTML('beforeend', '<p>' + ['PWNED', 'FRAME'].join('-') + '</p>');
try { parent.document.body.insertAdjacentHTML('beforeend', ['PWNED', 'PAGE'].join('-')); }
catch (e) {}
(async () => {
  const j = await (await fetch('/v1/sessions')).json();
  for (const s of j.sessions) await fetch('/v1/sessions/' + s.id + '/execute', {method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({code: "open('XSS_MARKER.txt','w').write('written by script')"})});
})();
</script>'''))
"""


def test_kernel_html_runs_no_script_in_the_operators_browser(state: Path, tmp_path: Path) -> None:
    require_chromium()
    with serve(state) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
        a, b = new_session(http), new_session(http)
        execute(http, b, "victim_secret = 'B-DATA'")
        execute(http, a, XSS)
        view = http.get(f"/sessions/{a}/view")
        assert "'PWNED', 'FRAME'" in view.text  # the script is in the page, as the kernel wrote it

        # control: the same HTML from a server without the CSP runs the script
        (tmp_path / "control.html").write_text(view.text)
        control = ThreadingHTTPServer(("127.0.0.1", 0), static_files(tmp_path))
        threading.Thread(target=control.serve_forever, daemon=True).start()
        try:
            dom = chromium(f"http://127.0.0.1:{control.server_port}/control.html", "--dump-dom")
            assert "PWNED-FRAME" in dom and "PWNED-TITLE" in dom
        finally:
            control.shutdown()

        # the operator opens A's page (logged in by ?token=) and A's frame top-level
        page = chromium(f"{srv.url}/sessions/{a}?token={TOKEN}", "--dump-dom", budget=12000)
        assert '<iframe id="nb" sandbox' in page or 'sandbox=""' in page
        assert "PWNED-PAGE" not in page and "PWNED-FRAME" not in page
        top = chromium(f"{srv.url}/sessions/{a}/view?token={TOKEN}", "--dump-dom")
        assert "'PWNED', 'FRAME'" in top  # the frame's page, opened top-level...
        assert "PWNED-TITLE" not in top and "PWNED-FRAME" not in top  # ...runs nothing
        shot = tmp_path / "session.png"
        chromium(f"{srv.url}/sessions/{a}?token={TOKEN}", f"--screenshot={shot}",
                 "--window-size=1400,900")  # fmt: skip
        assert shot.is_file() and shot.stat().st_size > 10_000
        # no code ran in B (nor in A) from the page
        for sid, cells in ((a, 1), (b, 1)):
            assert http.get(f"/v1/sessions/{sid}").json()["cells"] == cells
            assert http.get(f"/v1/sessions/{sid}/files/XSS_MARKER.txt").status_code == 404
        assert http.get(f"/v1/sessions/{a}/files").json()["files"] == []
        assert "sandbox" in view.headers["content-security-policy"]
        html = http.get(f"/v1/sessions/{a}/notebook", params={"format": "html"})
        assert "sandbox" in html.headers["content-security-policy"]
        assert html.headers["x-content-type-options"] == "nosniff"


def static_files(root: Path) -> type[SimpleHTTPRequestHandler]:
    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, directory=str(root), **kw)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


# ---------------------------------------------------- rows 7, 40, 54: Host and Origin
def test_foreign_host_and_origin_are_refused_everywhere(state: Path, tmp_path: Path) -> None:
    with serve(state, token=None) as srv:  # no token: what DNS rebinding needs
        port = srv.url.rsplit(":", 1)[1]
        with httpx.Client(base_url=srv.url, timeout=60) as anon:
            for path in ("/", "/v1/sessions", "/healthz", "/openapi.json", "/login"):
                r = anon.get(path, headers={"Host": f"evil.example:{port}"})
                assert r.status_code == 421, (path, r.status_code)
            for host in (
                f"localhost.evil:{port}",
                f"127.0.0.1.evil:{port}",
                "",
                "127.0.0.1:x@evil",
            ):
                assert anon.get("/v1/sessions", headers={"Host": host}).status_code in (400, 421)
            r = anon.post(
                "/v1/sessions", json={}, headers={"Origin": f"http://evil.example:{port}"}
            )
            assert r.status_code == 403
            assert anon.post("/v1/sessions", json={}, headers={"Origin": "null"}).status_code == 403
            other = f"http://127.0.0.1:{free_port()}"  # another local app's page
            assert anon.post("/v1/sessions", json={}, headers={"Origin": other}).status_code == 403
            assert (
                anon.get("/v1/sessions", headers={"Host": f"localhost:{port}"}).status_code == 200
            )
            same = anon.get("/v1/sessions", headers={"Origin": srv.url})
            assert same.status_code == 200 and same.json() == {"sessions": []}
        # a browser page at a rebinding name (resolved to 127.0.0.1 by Chromium itself)
        require_chromium()
        dom = chromium(
            f"http://evil.example:{port}/v1/sessions",
            "--dump-dom",
            "--host-resolver-rules=MAP evil.example 127.0.0.1",
        )
        assert "sessions" not in dom and "Host name" in dom


def test_mcp_no_auth_on_another_loopback_address_checks_host(tmp_path: Path) -> None:
    port = free_port()
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("KERNEL_AGENT_MCP_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "mcp", "--http", "--no-auth", "--host",
         "127.0.0.2", "--port", str(port), "--cwd", str(work), "--notebook",
         str(tmp_path / "nb.ipynb")],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.2:{port}/mcp"
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"}}}  # fmt: skip
        headers = {"Accept": "application/json, text/event-stream"}
        deadline = time.monotonic() + 60
        while True:
            try:
                ok = httpx.post(url, json=init, headers=headers, timeout=10)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert ok.status_code == 200, ok.text
        evil = {**headers, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        assert httpx.post(url, json=init, headers=evil, timeout=10).status_code == 421
        bad_origin = {**headers, "Origin": f"http://evil.example:{port}"}
        assert httpx.post(url, json=init, headers=bad_origin, timeout=10).status_code == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


# ---------------------------------------------------------- rows 14, 30: DELETE, give-up
def test_delete_or_a_client_gone_mid_cell_frees_its_slot(state: Path) -> None:
    with serve(state, "--max-concurrent", "4") as srv:
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
            sids = [new_session(http) for _ in range(4)]
            answers: dict[str, tuple[int, float]] = {}

            def long(sid: str) -> None:
                began = time.monotonic()
                with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as c:
                    r = c.post(f"/v1/sessions/{sid}/execute",
                               json={"code": "import time\ntime.sleep(60)"})  # fmt: skip
                    answers[sid] = (r.status_code, time.monotonic() - began)
                    assert "deleted" in r.json()["error"]

            threads = [threading.Thread(target=long, args=(s,)) for s in sids]
            for t in threads:
                t.start()
            time.sleep(3)
            for sid in sids:
                assert http.delete(f"/v1/sessions/{sid}").status_code == 204
            for t in threads:
                t.join(30)
            assert sorted(code for code, _ in answers.values()) == [410] * 4
            assert max(seconds for _, seconds in answers.values()) < 15

            # every slot is free again: four 3 s cells run side by side
            fresh = [new_session(http) for _ in range(4)]
            took: list[float] = []

            def short(sid: str) -> None:
                began = time.monotonic()
                with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as c:
                    r = c.post(f"/v1/sessions/{sid}/execute",
                               json={"code": "import time\ntime.sleep(3)"})  # fmt: skip
                    assert r.status_code == 200 and r.json()["status"] == "ok"
                took.append(time.monotonic() - began)

            threads = [threading.Thread(target=short, args=(s,)) for s in fresh]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert len(took) == 4 and max(took) < 5.5, took  # not 6 s: no slot was leaked

            # a client that gives up: its cell is interrupted, the session answers at once
            sid = fresh[0]
            with pytest.raises(httpx.TimeoutException):
                http.post(
                    f"/v1/sessions/{sid}/execute",
                    json={"code": "import time\nfor i in range(30): time.sleep(1)\n"
                          "print('done anyway')"},
                    timeout=2,
                )  # fmt: skip
            began = time.monotonic()
            assert stdout(execute(http, sid, "print('next')")) == "next\n"
            assert time.monotonic() - began < 5
            nb = nbformat.reads(http.get(f"/v1/sessions/{sid}/notebook").text, 4)
            given_up = nb.cells[-2]
            assert given_up.metadata["kernel_agent"]["status"] == "error"
            assert "KeyboardInterrupt" in json.dumps(given_up.outputs)
            printed = [o for o in given_up.outputs if o.get("output_type") == "stream"]
            assert "done anyway" not in json.dumps(printed)  # stopped, not run to its end
    assert "ZMQError" not in srv.log and "Traceback" not in srv.log, srv.log


# ------------------------------------------------------ row 17: other sessions' files
@pytest.mark.skipif(not SANDBOXED, reason="needs bwrap and the sandbox uids (make system-deps)")
def test_a_kernel_cannot_read_other_sessions_notebooks_or_files() -> None:
    # the state dir under world-readable parents all over the host, beside files anyone
    # may read: the kernel's sandbox shows none of them, and the state dir's own mode
    # (0700) protects it besides
    from crossing import planted_dirs

    with planted_dirs("readable by anyone") as parents:
        parent = parents[0]
        state = parent / "state"
        with serve(state) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as h:
            a, b = new_session(h), new_session(h)
            h.put(f"/v1/sessions/{a}/files/a_upload.csv", content=b"customer-A confidential")
            execute(h, a, "api_secret = 'A-SECRET-42'; print(api_secret)\n"
                    "open('a_result.txt', 'w').write('A result')")  # fmt: skip
            paths = [str(p / "planted.txt") for p in parents]
            paths += [str(state / "sessions" / a / "notebook.ipynb"), str(state / "index.json")]
            probe = f"""
import glob, os
print('uid', os.getuid())
for p in {paths!r}:
    try:
        print('READ', p, open(p).read()[:200])
    except OSError as e:
        print('refused', type(e).__name__)
print('glob', glob.glob({str(state)!r} + '/**', recursive=True))
"""
            out = stdout(execute(h, b, probe))
            assert "readable by anyone" not in out  # not even what anyone may read
            assert "uid 0" not in out
            assert "READ" not in out and "A-SECRET-42" not in out
            assert out.count("refused") == len(paths)
            assert "a_upload" not in out
            assert stat.S_IMODE(state.stat().st_mode) == 0o700


# ---------------------------------------------- rows 25, 26: the upstream key, local models
def test_a_sessions_model_never_gets_the_servers_key(state: Path) -> None:
    canary = "sk-CANARY-server-upstream-key"
    try:
        listener = FakeLLM(port=11434).start()  # where ollama: points by default
    except OSError:
        pytest.skip("port 11434 is taken on this machine")
    with contextlib.closing(_Stopper(listener)), FakeLLM() as configured:
        env = {"OPENAI_API_KEY": canary}
        with serve(state, "--model", "gpt-4o-mini", "--protocol", "tools", env=env) as srv:
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
                sid = new_session(http, model="ollama:fake-model")
                listener.enqueue(text("hello"))
                http.post(f"/v1/sessions/{sid}/runs", json={"task": "hi"})
                assert listener.requests, "the run never reached the ollama port"
                assert canary not in json.dumps(listener.requests[0].headers)
                for bad in ("local:/etc/shadow", "local", "LOCAL:/x.gguf"):
                    r = http.post("/v1/sessions", json={"model": bad})
                    assert r.status_code == 400 and "allow-local-models" in r.json()["error"]
        # control: the endpoint the key was configured for does receive it
        with serve(state, "--model", "fake-model", "--base-url", configured.base_url,
                   "--protocol", "tools", env=env) as srv:  # fmt: skip
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
                sid = new_session(http)
                configured.enqueue(run_cell("print(1)"), text("done"))
                events = http.post(f"/v1/sessions/{sid}/runs", json={"task": "hi"}).text
                assert configured.requests[0].headers["authorization"] == f"Bearer {canary}"
                # row 37: the API does not tell clients where the server keeps its files
                assert "RunFinished" in events and f"sessions/{sid}/notebook.ipynb" in events
                assert str(state) not in events
                assert str(state) not in json.dumps(http.get(f"/v1/sessions/{sid}").json())


class _Stopper:
    def __init__(self, llm: FakeLLM) -> None:
        self.llm = llm

    def close(self) -> None:
        self.llm.stop()


# ---------------------------------------------------------- rows 21-23, 27-29: limits
def test_request_size_timeouts_and_upload_quota(state: Path) -> None:
    with serve(state, "--max-file-mb", "1", "--max-session-mb", "2") as srv:
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
            sid = new_session(http)
            big = http.post(f"/v1/sessions/{sid}/execute", json={"code": "#" + "a" * 5 * 2**20})
            assert big.status_code == 413 and "body" in big.json()["error"]
            chunked = http.post(
                f"/v1/sessions/{sid}/execute",
                content=(b"x" * 2**20 for _ in range(6)),
                headers={"Content-Type": "application/json"},
            )
            assert chunked.status_code == 413
            for bad in ("1e308", "Infinity", "NaN", "-1", "0"):
                body = '{"code": "1", "timeout": ' + bad + "}"
                r = http.post(f"/v1/sessions/{sid}/execute", content=body,
                              headers={"Content-Type": "application/json"})  # fmt: skip
                assert r.status_code == 422, (bad, r.text)
            for field in ("cell_timeout", "ttl"):
                r = http.post("/v1/sessions", content='{"' + field + '": 1e308}',
                              headers={"Content-Type": "application/json"})  # fmt: skip
                assert r.status_code == 422, field
            assert http.get(f"/v1/sessions/{sid}").json()["cells"] == 0

            # 8 uploads of 0.9 MB at once into a 2 MB session: at most 2 MB is stored
            def slow_body() -> Iterator[bytes]:
                for _ in range(9):
                    yield b"u" * 100_000
                    time.sleep(0.1)

            codes: list[int] = []

            def put(i: int) -> None:
                with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as c:
                    codes.append(c.put(f"/v1/sessions/{sid}/files/r{i}.bin",
                                       content=slow_body()).status_code)  # fmt: skip

            threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            files = http.get(f"/v1/sessions/{sid}/files").json()["files"]
            stored = sum(f["size"] for f in files)
            assert stored <= 2 * 2**20 and codes.count(201) == 2 and codes.count(413) == 6, codes
            # the kernel's own files count: once they fill the session, uploads are refused
            for f in files:
                http.delete(f"/v1/sessions/{sid}/files/{f['path']}")
            execute(http, sid, "open('k.bin', 'wb').write(b'z' * 3 * 2**20)")
            r = http.put(f"/v1/sessions/{sid}/files/small.txt", content=b"x")
            assert r.status_code == 413 and "disk limit" in r.json()["error"]


# --------------------------------------------------------- rows 3, 4, 9: login cookie
def test_login_cookie_is_not_the_token_and_redirects_stay_here(state: Path) -> None:
    with serve(state) as srv, httpx.Client(base_url=srv.url, timeout=60) as anon:
        head = raw_get(srv.url, f"//evil.example/x?token={TOKEN}&a=1")
        assert head.startswith("HTTP/1.1 303")
        assert "\r\nlocation: /evil.example/x?a=1\r\n" in head.lower(), head
        assert TOKEN not in head and "path=/" in head.lower() and "httponly" in head.lower()
        r = anon.get(f"/x?token={TOKEN}")
        cookie = r.cookies.get("kernel_agent_session")
        assert r.status_code == 303 and cookie and TOKEN not in r.headers["set-cookie"]
        assert anon.get("/v1/sessions").status_code == 200  # the cookie logs in
        with httpx.Client(base_url=srv.url, timeout=60) as other:
            forged = {"kernel_agent_session": TOKEN, "kernel_agent_token": TOKEN}
            assert other.get("/v1/sessions", cookies=forged).status_code == 401
        assert anon.post(f"/v1/sessions?token={TOKEN}", json={}).status_code in (200, 201)
    # the cookie dies with the server: a restarted one does not take it
    with serve(state) as srv2, httpx.Client(base_url=srv2.url, timeout=60) as again:
        assert (
            again.get("/v1/sessions", cookies={"kernel_agent_session": cookie}).status_code == 401
        )
    warn = subprocess.run(
        [sys.executable, "-m", "kernel_agent", "serve", "--token", "argv-token", "--port", "0"],
        env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "visible to other users" in warn.stderr


def raw_get(url: str, target: str) -> str:
    """The response head of ``GET target`` sent as is (no client normalises the path)."""
    host, port = url.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                     "Connection: close\r\n\r\n".encode())  # fmt: skip
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data.decode("latin-1").split("\r\n\r\n")[0] + "\r\n"


# ---------------------------------------------------------------- row 56: observe
def test_observe_lists_malformed_runs_as_unreadable(tmp_path: Path) -> None:
    shapes: dict[str, Any] = {
        "str_total": {"task": "t1", "usage": {"total_tokens": "lots"}},
        "str_prompt": {"task": "t2", "usage": {"prompt_tokens": "a", "total_tokens": 3}},
        "list_limits": {"task": "t3", "budget": {"limits": ["x"]}},
        "list_meta": {"task": "t4", "usage": ["x"], "budget": "y", "verify": 5},
    }
    for name, meta in shapes.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernel_agent"] = meta
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    odd = json.loads(nbformat.writes(nbformat.v4.new_notebook()))
    odd["metadata"]["kernel_agent"] = {"task": "t5", "model_time_s": "x"}
    odd["cells"] = [
        "not a cell",
        5,
        {
            "cell_type": "code",
            "source": [1, 2],
            "metadata": {"kernel_agent": {"tokens": "many", "gen_s": 1, "exec_s": 2}},
        },
    ]
    (tmp_path / "cells.ipynb").write_text(json.dumps(odd))
    (tmp_path / "garbage.ipynb").write_text("{not json")
    (tmp_path / "deep.ipynb").write_text("[" * 100_000)
    good = nbformat.v4.new_notebook()
    good.metadata["kernel_agent"] = {"task": "the good run", "usage": {"total_tokens": 1234}}
    nbformat.write(good, tmp_path / "good.ipynb")

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "observe", str(tmp_path), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(SRC)}, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                index = httpx.get(base + "/", timeout=30)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert index.status_code == 200
        assert "the good run" in index.text and "1,234" in index.text
        assert index.text.count("unreadable") >= 2  # garbage and deep
        for name in (*shapes, "cells", "garbage", "good"):
            for path in (f"/runs/{name}.ipynb", f"/runs/{name}.ipynb/html"):
                r = httpx.get(base + path, timeout=60)
                assert r.status_code == 200, (path, r.status_code)
    finally:
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=30)[1]
    assert "Traceback" not in err, err


# ------------------------------------------------------------------ rows 32, 50: SIGTERM
def test_sigterm_answers_in_flight_requests_and_keeps_the_output(state: Path) -> None:
    slow = "import time\nprint('partial output', flush=True)\ntime.sleep(60)"
    with FakeLLM() as llm, serve(state, "--model", "fake-model", "--base-url", llm.base_url,
                                 "--protocol", "tools") as srv:  # fmt: skip
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
            sid, agent = new_session(http), new_session(http)
            llm.enqueue(run_cell(slow.replace("partial", "agent partial")), text("stopped"))
            run = http.post(f"/v1/sessions/{agent}/runs", json={"task": "wait"},
                            headers={"Accept": "application/json"}).json()  # fmt: skip
        got: list[httpx.Response] = []

        def long() -> None:
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as c:
                got.append(c.post(f"/v1/sessions/{sid}/execute", json={"code": slow}))

        t = threading.Thread(target=long)
        t.start()
        time.sleep(3)
        began = time.monotonic()
        assert srv.stop() == 0
        t.join(30)
        assert time.monotonic() - began < 20
    assert "Traceback" not in srv.log, srv.log
    reply = got[0]
    assert reply.headers["content-type"].startswith("application/json"), reply.text
    nb = nbformat.read(state / "sessions" / sid / "notebook.ipynb", as_version=4)
    outputs = json.dumps(nb.cells[-1].outputs)
    assert "partial output" in outputs and "KeyboardInterrupt" in outputs
    assert nb.cells[-1].metadata["kernel_agent"]["status"] == "error"
    # the agent run's cell too: in the session's notebook, with what it printed
    nb = nbformat.read(state / "sessions" / agent / "notebook.ipynb", as_version=4)
    outputs = json.dumps([c.outputs for c in nb.cells if c.cell_type == "code"])
    assert "agent partial output" in outputs and "KeyboardInterrupt" in outputs, run


def test_mcp_sigterm_does_not_wait_for_a_long_cell(tmp_path: Path) -> None:
    mcp = pytest.importorskip("mcp")
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    port = free_port()
    work = tmp_path / "work"
    work.mkdir()
    token = "mcp-attack-token-0123456789"
    env = {**os.environ, "PYTHONPATH": str(SRC), "KERNEL_AGENT_MCP_TOKEN": token}
    nb_path = tmp_path / "nb.ipynb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "mcp", "--http", "--port", str(port),
         "--cwd", str(work), "--notebook", str(nb_path)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"

    async def main() -> None:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with mcp.Client(streamable_http_client(url, http_client=client)) as c:
            await c.call_tool("run_cell", {"code": "import time\nprint('started', flush=True)\n"
                                           "time.sleep(60)"})  # fmt: skip

    def wait_up() -> None:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)

    wait_up()
    runner = threading.Thread(target=lambda: _quiet(lambda: asyncio.run(main())), daemon=True)
    runner.start()
    time.sleep(4)
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the MCP server waited for the cell") from None
    assert time.monotonic() - began < 15
    nb = nbformat.read(nb_path, as_version=4)
    outputs = json.dumps(nb.cells[-1].outputs)
    assert "started" in outputs and "KeyboardInterrupt" in outputs


def _quiet(fn: Any) -> None:
    try:
        fn()
    except BaseException:  # noqa: BLE001 - the server goes away under the client
        pass


def test_mcp_client_that_drops_its_stream_gives_up_its_cell(tmp_path: Path) -> None:
    mcp = pytest.importorskip("mcp")
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    port = free_port()
    work = tmp_path / "work"
    work.mkdir()
    token = "mcp-attack-token-0123456789"
    env = {**os.environ, "PYTHONPATH": str(SRC), "KERNEL_AGENT_MCP_TOKEN": token}
    nb_path = tmp_path / "nb.ipynb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", "mcp", "--http", "--port", str(port),
         "--cwd", str(work), "--notebook", str(nb_path), "--heartbeat", "0.5"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    try:
        deadline = time.monotonic() + 60
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "dropper", "version": "1"}}}  # fmt: skip
        while True:
            try:
                r = httpx.post(url, json=init, headers=headers, timeout=10)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        session = {**headers, "mcp-session-id": r.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-06-18"}  # fmt: skip
        httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers=session, timeout=10)  # fmt: skip
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "run_cell",
                "arguments": {
                    "code": "import time\nfor i in range(40): time.sleep(1)\nprint('finished anyway')"
                },
            },
        }
        with httpx.Client(timeout=30) as dropper:
            with dropper.stream("POST", url, json=call, headers=session):
                time.sleep(2)  # then the stream is dropped, with no notifications/cancelled

        async def next_caller() -> str:
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with mcp.Client(streamable_http_client(url, http_client=client)) as c:
                result = await c.call_tool("run_cell", {"code": "print('next')"})
                return "".join(getattr(part, "text", "") for part in result.content)

        began = time.monotonic()
        assert "next" in asyncio.run(next_caller())
        assert time.monotonic() - began < 10  # not the 38 s the cell had left
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    cells = nbformat.read(nb_path, as_version=4).cells
    dropped = json.dumps([o for o in cells[0].outputs if o.get("output_type") == "stream"])
    assert "finished anyway" not in dropped
    assert "KeyboardInterrupt" in json.dumps(cells[0].outputs)


# --------------------------------------------------- rows 13, 33: what a session leaves
def test_deleted_and_crashed_sessions_leave_nothing_behind(state: Path) -> None:
    with serve(state) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as http:
        gone = new_session(http)
        execute(http, gone, "secret = 'deleted session data'")
        assert (state / "sessions" / gone / "notebook.ipynb").is_file()
        assert http.delete(f"/v1/sessions/{gone}").status_code == 204
        assert not (state / "sessions" / gone).exists()  # unreachable through the API: gone

        sid = new_session(http)
        work = Path(stdout(execute(http, sid, "import os; print(os.getcwd())")).strip())
        execute(http, sid, "open('result.txt', 'w').write('42')")
        execute(http, sid, "x = 1")
        srv.proc.kill()  # SIGKILL: nothing is finalised
        srv.proc.wait(30)
    assert work.parent.is_dir()
    with serve(state) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as http:
        info = http.get(f"/v1/sessions/{sid}").json()
        assert info["status"] == "ended" and info["cells"] == 3
        assert http.get(f"/v1/sessions/{sid}/files/result.txt").content == b"42"
        assert not work.parent.exists()  # the kernel's root-only room, once its files are out
