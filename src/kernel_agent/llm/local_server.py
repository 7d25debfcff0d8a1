"""Serve a GGUF model on loopback with llama-cpp-python's OpenAI-compatible server.

The server is a child process (``python -m llama_cpp.server``) so the agent keeps one
code path through the ``openai`` client. It cannot outlive us: on Linux the kernel
kills it when the thread that started it dies (``PR_SET_PDEATHSIG``), it runs in its
own session so a terminal Ctrl-C reaches only us, and leaving the context manager
stops it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

from ..errors import ConfigError, LocalModelError
from ..syncify import SyncFacade, blocking
from .local_model import BUNDLED_MODEL, ProgressFn, is_local_model, resolve_local_model

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "AsyncLocalModelServer",
    "LocalModelServer",
    "local_endpoint",
    "server_arguments",
]

HOST = "127.0.0.1"
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
_PR_SET_PDEATHSIG = 1


class AsyncLocalModelServer:
    """One ``llama_cpp.server`` child on a free loopback port; ``async with`` it."""

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
        extra_args: Sequence[str] = (),
    ) -> None:
        self.model_path = Path(model_path)
        self._model_name = model_name or self.model_path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads  #: generation threads (llama's default: cores // 2)
        self.n_threads_batch = n_threads_batch  #: prompt threads (llama's default: cores)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.log_dir = log_dir
        self.extra_args = tuple(extra_args)
        #: the server's output; a temp file in ``log_dir`` unless given (then kept)
        self.log_path: Path | None = log_path
        self._temp_log = log_path is None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._finalizer: weakref.finalize | None = None

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
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self, port: int) -> list[str]:
        """The argv that starts the server."""
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path)]
        cmd += ["--model_alias", self._model_name, "--host", HOST, "--port", str(port)]
        cmd += ["--n_ctx", str(self.n_ctx)]
        if self.n_threads is not None:
            cmd += ["--n_threads", str(self.n_threads)]
        if self.n_threads_batch is not None:
            cmd += ["--n_threads_batch", str(self.n_threads_batch)]
        return cmd + list(self.extra_args)

    async def start(self) -> None:
        """Launch the server and wait until ``GET /v1/models`` answers 200.

        On Linux the server dies with the *thread* that starts it: start it from a
        thread that lives as long as you need it (the main one, or an event loop's).
        """
        if self._proc is not None:
            return
        _require_llama_cpp()
        if not self.model_path.is_file():
            raise ConfigError(f"no such model file: {self.model_path}")
        port = _free_port()
        with self._open_log() as log:
            self._proc = subprocess.Popen(
                self.command(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        self._port = port
        self._finalizer = weakref.finalize(self, _kill_group, self._proc)
        try:
            await self._wait_ready()
        except BaseException:
            await self._stop(keep_log=True)
            raise

    async def shutdown(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``stop_timeout``.

        A temp log is removed if the server was still healthy, kept if it had died.
        """
        await self._stop(keep_log=self._proc is not None and self._proc.poll() is not None)

    async def _stop(self, keep_log: bool) -> None:
        proc, self._proc, self._port = self._proc, None, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            if not await _wait_exit(proc, self.stop_timeout):
                _signal_group(proc, signal.SIGKILL)
                await _wait_exit(proc, 5.0)
        if self._temp_log and not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    async def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def __aenter__(self) -> AsyncLocalModelServer:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    async def _wait_ready(self) -> None:
        assert self._proc is not None and self._port is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout
        while True:
            rc = self._proc.poll()
            if rc is not None:
                raise LocalModelError(
                    f"the local model server exited with code {rc}: {self._last_log_line()}"
                )
            if await _http_ok(HOST, self._port, "/v1/models"):
                return
            if loop.time() >= deadline:
                raise LocalModelError(
                    f"the local model server did not answer within {self.startup_timeout:g}s "
                    f"(log: {self.log_path})"
                )
            await asyncio.sleep(0.1)

    def _open_log(self) -> BinaryIO:
        if not self._temp_log and self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            return self.log_path.open("wb")
        log_dir = self.log_dir or _default_log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
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
    }
    options.update(server_options)
    return path, options


@contextlib.contextmanager
def local_endpoint(
    settings: Settings, progress: ProgressFn | None = None, **server_options: object
) -> Iterator[tuple[str, str]]:
    """Serve ``settings.model`` (None, ``local`` or ``local:PATH``): yield (base_url, model)."""
    path, options = server_arguments(settings, progress, **server_options)
    with LocalModelServer(path, **options) as server:
        yield server.base_url, server.model_name


# -- internals ---------------------------------------------------------------------


def _require_llama_cpp() -> None:
    for name in _SERVER_MODULES:
        if importlib.util.find_spec(name) is None:
            raise LocalModelError(
                "the local model needs llama-cpp-python: pip install 'kernel-agent[local]'"
            )


def _default_log_dir() -> Path:
    from ..settings import default_home

    return default_home() / "logs"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


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
        await asyncio.sleep(0.05)
    return True


async def _http_ok(host: str, port: int, path: str) -> bool:
    """True if ``GET path`` answers 200 (raw HTTP/1.0: no proxies, no extra dependency)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        writer.write(f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 5.0)
        return status.split()[1:2] == [b"200"]
    except (OSError, asyncio.TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
