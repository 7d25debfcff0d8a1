"""Serve a GGUF model on loopback with llama-cpp-python's OpenAI-compatible server.

The server is a child process (:mod:`kernel_agent.llm.local_daemon`, which runs
llama-cpp-python's app) so the agent keeps one code path through the ``openai`` client.
Every request carries a fresh bearer token, so other local users cannot use it. It
binds its own free port and uses every core for both prompt and generation.

Two lifetimes, chosen by ``keep_alive`` (seconds; ``KERNEL_AGENT_LOCAL_KEEP_ALIVE``):

- ``0``: the server lives and dies with this run. On Linux the kernel kills it when
  the thread that started it dies (``PR_SET_PDEATHSIG``), it runs in its own session
  so a terminal Ctrl-C reaches only us, and leaving the context manager stops it
  (SIGTERM, then SIGKILL).
- ``> 0`` (like Ollama's keep-alive): the first run starts a detached server and
  records it in a private (0700) state dir: pid, port and token, keyed by the model
  file and the server options. Later runs attach to it if it is alive, is really
  ours (its command line, and on Linux the listening socket's owner) and answers
  with the token. A run holds a shared ``flock`` on the server's lease file while it
  uses it; the server exits once nobody holds it and no request came for
  ``keep_alive`` seconds. A lock file serialises starting, so two runs starting at
  once share one server.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO

from ..errors import ConfigError, LocalModelError
from ..syncify import SyncFacade, blocking
from .local_daemon import HOST, STATS_PATH
from .local_model import BUNDLED_MODEL, ProgressFn, is_local_model, resolve_local_model
from .local_state import (
    DAEMON,
    alive,
    listener_is_ours,
    lock_file,
    ours,
    private_dir,
    read_state,
    take_lease,
    wait_gone,
)
from .local_threads import candidates

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "AsyncLocalModelServer",
    "LocalModelServer",
    "local_endpoint",
    "model_settings",
    "private_dir",
    "server_arguments",
]

_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
_PR_SET_PDEATHSIG = 1


def model_settings(
    model_path: Path,
    model_name: str,
    *,
    n_ctx: int = 8192,
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
    **overrides: object,
) -> dict[str, object]:
    """llama-cpp-python ``ModelSettings`` keywords for our server.

    Measured on this model (see bench/bench_local_model.py): every core for both
    generation and prompt to start with (llama's server default is half the cores for
    generation); on a machine busy with other work fewer are faster, so unless the counts
    are given (``KERNEL_AGENT_LOCAL_THREADS``) the server then picks them by measured
    speed (:mod:`.local_threads`);
    ``logits_all`` off (the server's default computes and copies the logits of every
    prompt token, only needed for logprobs); no ``mlock`` (the weights stay shared in
    the page cache). Prompt prefixes are reused from the live KV cache by llama-cpp-python
    itself; ``cache`` (a RAM copy of whole states) stays off unless overridden.
    """
    cores = usable_cores()
    settings: dict[str, object] = {
        "model": str(model_path),
        "model_alias": model_name,
        "n_ctx": n_ctx,
        "n_threads": n_threads or cores,
        "n_threads_batch": n_threads_batch or cores,
        "n_batch": 512,
        "logits_all": False,
        "use_mlock": False,
        "cache": False,
        "verbose": False,
    }
    settings.update(overrides)
    return settings


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, else ``os.cpu_count()``)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class AsyncLocalModelServer:
    """One local model server; ``async with`` it (see the module doc for ``keep_alive``)."""

    def __init__(
        self,
        model_path: Path,
        *,
        model_name: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 5.0,
        log_dir: Path | None = None,
        log_path: Path | None = None,
        keep_alive: float = 0.0,
        state_dir: Path | None = None,
        model_options: Mapping[str, object] | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self._model_name = model_name or self.model_path.stem
        self.settings = model_settings(
            self.model_path,
            self._model_name,
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            **dict(model_options or {}),
        )
        #: thread counts the server chooses from by measured speed (empty: fixed counts)
        self.tune_threads: list[int] = (
            candidates(usable_cores()) if n_threads is None and n_threads_batch is None else []
        )
        if len(self.tune_threads) < 2:
            self.tune_threads = []
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.log_dir = log_dir
        if keep_alive < 0:
            raise ConfigError(f"keep-alive must be 0 or more seconds, got {keep_alive}")
        self.keep_alive = keep_alive
        self.state_dir = state_dir
        #: the server's output; a temp file in ``log_dir`` unless given (then kept)
        self.log_path: Path | None = log_path
        self._temp_log = log_path is None and keep_alive == 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._port: int | None = None
        self._token: str | None = None
        self._lease: int | None = None  # fd holding the shared lease lock
        self._finalizer: weakref.finalize | None = None
        #: True if :meth:`start` attached to a server that an earlier run started
        self.reused = False

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, for ``openai.OpenAI(base_url=...)``."""
        if self._port is None:
            raise LocalModelError("the local model server is not running")
        return f"http://{HOST}:{self._port}/v1"

    @property
    def api_key(self) -> str:
        """The bearer token the server requires."""
        if self._token is None:
            raise LocalModelError("the local model server is not running")
        return self._token

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def stats_url(self) -> str:
        """llama.cpp's counters (``GET`` with the token): see :mod:`.local_daemon`."""
        return self.base_url[: -len("/v1")] + STATS_PATH

    async def start(self) -> None:
        """Start (or, with keep-alive, attach to) the server; ready when this returns.

        With ``keep_alive == 0`` the server dies with the *thread* that starts it (on
        Linux): start it from a thread that lives as long as you need it.
        """
        if self._port is not None:
            return
        _require_llama_cpp()
        if not self.model_path.is_file():
            raise ConfigError(f"no such model file: {self.model_path}")
        if self.keep_alive == 0:
            await self._launch(detach=False, state=None, lease=None)
        else:
            await self._attach_or_launch()

    async def shutdown(self) -> None:
        """Stop our own server (SIGTERM, then SIGKILL), or let go of a kept-alive one.

        A temp log is removed if the server was still healthy, kept if it had died.
        """
        await self._stop(keep_log=self._proc is not None and self._proc.poll() is not None)

    async def is_alive(self) -> bool:
        return self._pid is not None and alive(self._pid)

    async def __aenter__(self) -> AsyncLocalModelServer:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    # -- keep-alive: attach to the server an earlier run left, or start one ------------

    def slot(self) -> str:
        """The server's key: the model file (path, size, mtime) and the server options."""
        st = self.model_path.stat()
        key = {"settings": self.settings, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if self.tune_threads:
            key["tune_threads"] = self.tune_threads
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    async def _attach_or_launch(self) -> None:
        directory = private_dir(self.state_dir or _default_state_dir())
        slot = self.slot()
        state, lease = directory / f"{slot}.json", directory / f"{slot}.lease"
        lock = await lock_file(directory / f"{slot}.lock", self.startup_timeout + 10)
        try:
            found = read_state(state)
            if found is not None and await self._attach(found, lease):
                return
            pid = found.get("pid") if found is not None else None
            if isinstance(pid, int) and ours(pid):  # exiting: let its memory go first
                await wait_gone(pid, self.stop_timeout + 5)
            if self.log_path is None:
                self.log_path = _logs_dir(self.log_dir) / f"llama-server-{slot}.log"
            await self._launch(detach=True, state=state, lease=lease)
            self._lease = take_lease(lease)
            if self._lease is None:  # the new server cannot be idle yet: a bug if it is
                raise LocalModelError("the local model server stopped as it started")
        finally:
            os.close(lock)

    async def _attach(self, found: dict[str, Any], lease: Path) -> bool:
        pid, port, token = found.get("pid"), found.get("port"), found.get("token")
        if not (isinstance(pid, int) and isinstance(port, int) and isinstance(token, str)):
            return False
        if found.get("model") != str(self.model_path):
            return False
        if not (ours(pid) and listener_is_ours(port)):
            return False
        fd = take_lease(lease)
        if fd is None:  # it is exiting
            return False
        if not await _http_ok(HOST, port, "/v1/models", token):
            os.close(fd)
            return False
        self._lease, self._pid, self._port, self._token = fd, pid, port, token
        self.reused = True
        return True

    # -- launching, readiness, stopping -----------------------------------------------

    async def _launch(self, *, detach: bool, state: Path | None, lease: Path | None) -> None:
        token = secrets.token_urlsafe(32)
        config = {
            "model": self.settings,
            "tune_threads": self.tune_threads or None,
            "api_key": token,
            "keep_alive": self.keep_alive if detach else None,
            "lease": str(lease) if lease else None,
            "state": str(state) if state else None,
            "detach": detach,
        }
        read_end, write_end = os.pipe()
        try:
            with self._open_log() as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", DAEMON, "--ready-fd", str(write_end)],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_end,),
                    start_new_session=True,
                    preexec_fn=None if detach else _die_with_parent(),
                    cwd="/",
                )
            os.close(write_end)
            write_end = -1
            assert proc.stdin is not None
            with proc.stdin:
                proc.stdin.write(json.dumps(config).encode())
            if detach:
                await _wait_exit(proc, 10.0)  # the fork's parent exits at once
            else:
                self._proc = proc
                self._finalizer = weakref.finalize(self, _kill_group, proc)
            self._token = token
            pid, port = await self._wait_ready(read_end, proc if not detach else None)
        except BaseException:
            if not detach or self._pid is not None:
                await self._stop(keep_log=True)
            raise
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        self._pid, self._port = pid, port

    async def _wait_ready(
        self, ready: int, proc: subprocess.Popen[bytes] | None
    ) -> tuple[int, int]:
        """Read ``"PID\\n"`` then ``"PORT\\n"`` from the ready pipe (EOF: it died first)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout
        data = b""
        while data.count(b"\n") < 2:
            if select.select([ready], [], [], 0)[0]:
                chunk = os.read(ready, 64)
                if not chunk:
                    rc = proc.wait() if proc is not None else "?"
                    raise LocalModelError(
                        f"the local model server exited with code {rc}: {self._last_log_line()}"
                    )
                data += chunk
                if self._pid is None and b"\n" in data:
                    self._pid = int(data.split(b"\n", 1)[0])
                continue
            if loop.time() >= deadline:
                raise LocalModelError(
                    f"the local model server did not answer within {self.startup_timeout:g}s "
                    f"(log: {self.log_path})"
                )
            await asyncio.sleep(0.05)
        pid_text, port_text = data.decode().split()[:2]
        return int(pid_text), int(port_text)

    async def _stop(self, keep_log: bool) -> None:
        proc, self._proc = self._proc, None
        pid, self._pid, self._port, self._token = self._pid, None, None, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        lease, self._lease = self._lease, None
        if lease is not None:  # kept alive: let go, the server stops itself when idle
            os.close(lease)
            return
        if proc is None and pid is not None:  # a detached server that failed to start
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            if not await _wait_exit(proc, self.stop_timeout):
                _signal_group(proc, signal.SIGKILL)
                await _wait_exit(proc, 5.0)
        if self._temp_log and not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def _open_log(self) -> BinaryIO:
        if not self._temp_log and self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            return self.log_path.open("wb")
        log_dir = _logs_dir(self.log_dir)
        fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log", dir=log_dir)
        self.log_path = Path(name)
        return os.fdopen(fd, "wb")

    def _last_log_line(self) -> str:
        try:
            with open(self.log_path or "", "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "(empty log)")
        return f"{last} (log: {self.log_path})"


class LocalModelServer(SyncFacade[AsyncLocalModelServer]):
    """Blocking :class:`AsyncLocalModelServer`; use it as a context manager."""

    _async_class = AsyncLocalModelServer
    start = blocking(AsyncLocalModelServer.start)
    shutdown = blocking(AsyncLocalModelServer.shutdown)
    is_alive = blocking(AsyncLocalModelServer.is_alive)


def server_arguments(
    settings: Settings, progress: ProgressFn | None = None, **server_options: object
) -> tuple[Path, dict[str, object]]:
    """(model file, server keyword arguments) for ``settings.model``.

    The model is None, ``local`` or ``local:PATH``.

    Assembles and verifies the bundled model if needed; both the blocking
    :func:`local_endpoint` and the agent's async endpoint build their server from this.
    """
    spec = settings.model or "local"
    if not is_local_model(spec):
        raise ConfigError(f"not a local model: {spec!r}")
    path = resolve_local_model(spec, settings.home, progress)
    options: dict[str, object] = {
        "model_name": BUNDLED_MODEL.name if spec == "local" else None,
        "startup_timeout": settings.startup_timeout,
        "log_dir": settings.home / "logs",
        "keep_alive": settings.local_keep_alive,
        "n_threads": settings.local_threads,
        "n_threads_batch": settings.local_threads,
        "state_dir": settings.home / "servers",
    }
    options.update(server_options)
    return path, options


@contextlib.contextmanager
def local_endpoint(
    settings: Settings, progress: ProgressFn | None = None, **server_options: object
) -> Iterator[tuple[str, str, str]]:
    """Serve ``settings.model`` (None, ``local`` or ``local:PATH``).

    Yields (base_url, model, api_key).
    """
    path, options = server_arguments(settings, progress, **server_options)
    with LocalModelServer(path, **options) as server:
        yield server.base_url, server.model_name, server.api_key


# -- internals ---------------------------------------------------------------------


def _require_llama_cpp() -> None:
    for name in _SERVER_MODULES:
        if importlib.util.find_spec(name) is None:
            raise LocalModelError(
                "the local model needs llama-cpp-python: pip install 'kernel-agent[local]'"
            )


def _default_state_dir() -> Path:
    from ..settings import default_home

    return default_home() / "servers"


def _logs_dir(log_dir: Path | None) -> Path:
    if log_dir is None:
        from ..settings import default_home

        log_dir = default_home() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGKILL the child when its parent thread dies."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Last resort (garbage collection, interpreter exit): kill without waiting long."""
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1.0)


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while proc.poll() is None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def _http_ok(host: str, port: int, path: str, token: str) -> bool:
    """True if ``GET path`` with the token answers 200 (raw HTTP/1.0: no proxies)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        writer.write(
            f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 5.0)
        return status.split()[1:2] == [b"200"]
    except (OSError, asyncio.TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
