"""A typed client for ``kernel-agent serve``, over httpx: :class:`Client` and :class:`AsyncClient`.

::

    with Client("http://127.0.0.1:8000", token="T") as ka:
        s = ka.create_session(ttl=600)
        ka.upload(s.id, "data/sales.csv", Path("sales.csv").read_bytes())
        cell = ka.execute(s.id, "import pandas as pd; print(pd.read_csv('data/sales.csv').shape)")
        for event in ka.run(s.id, "plot sales by month"):
            print(event["type"])
        Path("out.ipynb").write_bytes(ka.notebook(s.id))

The request and response shapes live once, in :class:`_Api`: each entry builds a
:class:`_Request` that names the parser of its answer, typed by what it returns
(:class:`SessionInfo`, :class:`ExecuteResult`, :class:`RunInfo`, ``list[FileEntry]``,
``bytes``...). The clients declare each entry once, with :class:`_sends` (blocking) or
:class:`_awaits` (asyncio), so a type checker sees every method's real signature and
result. Run events are decoded from Server-Sent Events by the pure :class:`SSEDecoder`;
each is a dict (:data:`RunEvent`) whose ``type`` is its kind.

Errors: :class:`ServiceRefused` (``status``, ``message``, ``retry_after`` for 429).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypedDict, TypeVar, overload
from urllib.parse import quote

from .errors import ServiceRefused

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - the original package name
    import httpx  # type: ignore[no-redef]


__all__ = [
    "Client",
    "AsyncClient",
    "ServiceRefused",
    "SessionInfo",
    "ExecuteResult",
    "RunInfo",
    "FileEntry",
    "CellErrorInfo",
    "RunEvent",
    "SSEDecoder",
]

T = TypeVar("T")
P = ParamSpec("P")

#: one event of a run: ``{"type": kind, ...its fields}``; the first is ``{"type": "run",
#: "id", "task"}``, the last ``{"type": "result", ...}`` (the run's :class:`RunInfo` fields)
RunEvent = dict[str, Any]


class CellErrorInfo(TypedDict):
    """A failed cell's error, as :attr:`ExecuteResult.error` holds it."""

    ename: str
    evalue: str
    traceback: list[str]


@dataclass
class SessionInfo:
    id: str
    status: str
    kernel: str
    cells: int
    ttl_s: float
    ttl_left_s: float
    busy: bool = False
    sandbox: str = ""
    reason: str | None = None
    runs: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> SessionInfo:
        names = (
            "id",
            "status",
            "kernel",
            "cells",
            "ttl_s",
            "ttl_left_s",
            "busy",
            "sandbox",
            "reason",
            "runs",
        )
        return cls(**{n: data[n] for n in names if n in data}, raw=data)


@dataclass
class ExecuteResult:
    status: str
    execution_count: int | None
    outputs: list[dict[str, Any]]
    error: CellErrorInfo | None
    duration_s: float
    restarted: bool
    cell: int

    @classmethod
    def parse(cls, data: dict[str, Any]) -> ExecuteResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def stdout(self) -> str:
        return "".join(o.get("text", "") for o in self.outputs if o.get("name") == "stdout")


@dataclass
class RunInfo:
    id: str
    task: str
    status: str
    error: str | None
    result: dict[str, Any] | None
    events: int = 0

    @classmethod
    def parse(cls, data: dict[str, Any]) -> RunInfo:
        return cls(**{k: data[k] for k in ("id", "task", "status", "error", "result", "events")})


@dataclass
class FileEntry:
    path: str
    kind: str
    size: int

    @classmethod
    def parse_list(cls, data: dict[str, Any]) -> list[FileEntry]:
        return [cls(**f) for f in data["files"]]


class SSEDecoder:
    """Server-Sent Events from text chunks: ``feed(text) -> [(event, data), ...]``."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[tuple[str, str]]:
        self._buffer += text.replace("\r\n", "\n")
        frames = []
        while "\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split("\n\n", 1)
            event, data = "message", []
            for line in raw.split("\n"):
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
            if data:
                frames.append((event, "\n".join(data)))
        return frames


Response = Any  # an httpx (or httpx2) response


def _check(response: Response) -> Response:
    if response.status_code >= 400:
        try:
            message = response.json().get("error") or response.text
        except ValueError:
            message = response.text
        retry = response.headers.get("retry-after")
        raise ServiceRefused(response.status_code, str(message), float(retry) if retry else None)
    return response


def _json(parse: Callable[[Any], T]) -> Callable[[Response], T]:
    return lambda response: parse(_check(response).json())


def _bytes(response: Response) -> bytes:
    return bytes(_check(response).content)


def _none(response: Response) -> None:
    _check(response)


def _sessions(data: dict[str, Any]) -> list[SessionInfo]:
    return [SessionInfo.parse(s) for s in data["sessions"]]


def _size(data: dict[str, Any]) -> int:
    return int(data["size"])


def _path(path: str) -> str:
    return quote(path, safe="/")


@dataclass(frozen=True)
class _Request(Generic[T]):
    """One request: what to send, and how to read its answer into a ``T``."""

    method: str
    url: str
    parse: Callable[[Response], T]
    kw: dict[str, Any] = field(default_factory=dict)


class _Api:
    """Every request the API knows: what to send, and how to read the answer."""

    @staticmethod
    def create_session(
        *, kernel: str | None = None, ttl: float | None = None, **settings: Any
    ) -> _Request[SessionInfo]:
        """A new session (``settings``: model, temperature, max_steps, cell_timeout)."""
        body = {"kernel": kernel, "ttl": ttl, **settings}
        json_body = {k: v for k, v in body.items() if v is not None}
        return _Request("POST", "/v1/sessions", _json(SessionInfo.parse), {"json": json_body})

    @staticmethod
    def sessions() -> _Request[list[SessionInfo]]:
        """Every session the server knows (live and ended)."""
        return _Request("GET", "/v1/sessions", _json(_sessions))

    @staticmethod
    def session(sid: str) -> _Request[SessionInfo]:
        return _Request("GET", f"/v1/sessions/{sid}", _json(SessionInfo.parse))

    @staticmethod
    def delete_session(sid: str) -> _Request[None]:
        """Stop the kernel and remove the session's files and notebooks."""
        return _Request("DELETE", f"/v1/sessions/{sid}", _none)

    @staticmethod
    def execute(sid: str, code: str, timeout: float | None = None) -> _Request[ExecuteResult]:
        """Run one cell in the session's kernel."""
        body: dict[str, Any] = {"code": code}
        if timeout is not None:
            body["timeout"] = timeout
        url = f"/v1/sessions/{sid}/execute"
        return _Request("POST", url, _json(ExecuteResult.parse), {"json": body})

    @staticmethod
    def upload(sid: str, path: str, content: bytes) -> _Request[int]:
        """Put ``content`` at ``path`` in the session's work dir; returns its size."""
        url = f"/v1/sessions/{sid}/files/{_path(path)}"
        return _Request("PUT", url, _json(_size), {"content": content})

    @staticmethod
    def download(sid: str, path: str) -> _Request[bytes]:
        return _Request("GET", f"/v1/sessions/{sid}/files/{_path(path)}", _bytes)

    @staticmethod
    def delete_file(sid: str, path: str) -> _Request[None]:
        return _Request("DELETE", f"/v1/sessions/{sid}/files/{_path(path)}", _none)

    @staticmethod
    def files(sid: str) -> _Request[list[FileEntry]]:
        """The session's files and folders, with sizes."""
        return _Request("GET", f"/v1/sessions/{sid}/files", _json(FileEntry.parse_list))

    @staticmethod
    def get_run(sid: str, run_id: str) -> _Request[RunInfo]:
        return _Request("GET", f"/v1/sessions/{sid}/runs/{run_id}", _json(RunInfo.parse))

    @staticmethod
    def start_run(sid: str, task: str) -> _Request[RunInfo]:
        """Start a run without following it; returns its RunInfo at once."""
        kw = {"json": {"task": task}, "headers": {"Accept": "application/json"}}
        return _Request("POST", f"/v1/sessions/{sid}/runs", _json(RunInfo.parse), kw)

    @staticmethod
    def notebook(sid: str, *, clean: bool = False, format: str = "ipynb") -> _Request[bytes]:
        """The session's transcript (or its clean notebook), as ipynb or HTML bytes."""
        params = {"clean": str(clean).lower(), "format": format}
        return _Request("GET", f"/v1/sessions/{sid}/notebook", _bytes, {"params": params})


class _sends(Generic[P, T]):  # noqa: N801 (used like a decorator)
    """An :class:`_Api` entry as a blocking method of :class:`Client`: same arguments,
    returns the parsed answer."""

    def __init__(self, build: Callable[P, _Request[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _sends[P, T]: ...

    @overload
    def __get__(self, obj: Client, owner: type | None = None) -> Callable[P, T]: ...

    def __get__(
        self, obj: Client | None, owner: type | None = None
    ) -> _sends[P, T] | Callable[P, T]:
        if obj is None:
            return self
        build, client = self.build, obj

        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            request = build(*args, **kwargs)
            return request.parse(client.http.request(request.method, request.url, **request.kw))

        call.__doc__ = self.__doc__
        return call


class _awaits(Generic[P, T]):  # noqa: N801 (used like a decorator)
    """An :class:`_Api` entry as a coroutine method of :class:`AsyncClient`."""

    def __init__(self, build: Callable[P, _Request[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _awaits[P, T]: ...

    @overload
    def __get__(
        self, obj: AsyncClient, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(
        self, obj: AsyncClient | None, owner: type | None = None
    ) -> _awaits[P, T] | Callable[P, Coroutine[Any, Any, T]]:
        if obj is None:
            return self
        build, client = self.build, obj

        async def call(*args: P.args, **kwargs: P.kwargs) -> T:
            request = build(*args, **kwargs)
            response = await client.http.request(request.method, request.url, **request.kw)
            return request.parse(response)

        call.__doc__ = self.__doc__
        return call


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Client:
    """The blocking client. ``run()`` yields each event dict, then ``{"type": "result", ...}``."""

    def __init__(
        self, base_url: str, token: str | None = None, timeout: float = 300.0, **kw: Any
    ) -> None:
        self.http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout, **kw)

    create_session = _sends(_Api.create_session)
    sessions = _sends(_Api.sessions)
    session = _sends(_Api.session)
    delete_session = _sends(_Api.delete_session)
    execute = _sends(_Api.execute)
    upload = _sends(_Api.upload)
    download = _sends(_Api.download)
    delete_file = _sends(_Api.delete_file)
    files = _sends(_Api.files)
    get_run = _sends(_Api.get_run)
    start_run = _sends(_Api.start_run)
    notebook = _sends(_Api.notebook)

    def run(self, sid: str, task: str) -> Iterator[RunEvent]:
        """Start a run and follow its events (a run outlives a client that stops reading)."""
        with self.http.stream(
            "POST",
            f"/v1/sessions/{sid}/runs",
            json={"task": task},
            headers={"Accept": "text/event-stream"},
        ) as response:
            if response.status_code >= 400:
                response.read()
                _check(response)
            decoder = SSEDecoder()
            for text in response.iter_text():
                for event, data in decoder.feed(text):
                    yield _frame(event, data)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The asyncio client: every method is awaited; ``run()`` is an async iterator."""

    def __init__(
        self, base_url: str, token: str | None = None, timeout: float = 300.0, **kw: Any
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=_headers(token), timeout=timeout, **kw
        )

    create_session = _awaits(_Api.create_session)
    sessions = _awaits(_Api.sessions)
    session = _awaits(_Api.session)
    delete_session = _awaits(_Api.delete_session)
    execute = _awaits(_Api.execute)
    upload = _awaits(_Api.upload)
    download = _awaits(_Api.download)
    delete_file = _awaits(_Api.delete_file)
    files = _awaits(_Api.files)
    get_run = _awaits(_Api.get_run)
    start_run = _awaits(_Api.start_run)
    notebook = _awaits(_Api.notebook)

    async def run(self, sid: str, task: str) -> AsyncIterator[RunEvent]:
        """Start a run and follow its events (a run outlives a client that stops reading)."""
        async with self.http.stream(
            "POST",
            f"/v1/sessions/{sid}/runs",
            json={"task": task},
            headers={"Accept": "text/event-stream"},
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                _check(response)
            decoder = SSEDecoder()
            async for text in response.aiter_text():
                for event, data in decoder.feed(text):
                    yield _frame(event, data)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _frame(event: str, data: str) -> RunEvent:
    """An SSE frame as a dict: run events keep their own type; the others are tagged."""
    body = json.loads(data)
    if event == "event":
        return dict(body)
    return {"type": event, **body}
