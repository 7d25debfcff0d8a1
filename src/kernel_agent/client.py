"""A typed client for ``kernel-agent serve``, over httpx: :class:`Client` and :class:`AsyncClient`.

::

    with Client("http://127.0.0.1:8000", token="T") as ka:
        s = ka.create_session(ttl=600)
        ka.upload(s.id, "data/sales.csv", Path("sales.csv").read_bytes())
        cell = ka.execute(s.id, "import pandas as pd; print(pd.read_csv('data/sales.csv').shape)")
        for event in ka.run(s.id, "plot sales by month"):
            print(event["type"])
        Path("out.ipynb").write_bytes(ka.notebook(s.id))

The request and response shapes live once, in :class:`_Api`: each method builds a
request and names the parser for its answer; the sync and async clients differ only
in how they send it. Run events are decoded from Server-Sent Events by the pure
:class:`SSEDecoder`.

Errors: :class:`ServiceRefused` (``status``, ``message``, ``retry_after`` for 429).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - the original package name
    import httpx  # type: ignore[no-redef]

from .errors import ServiceRefused

__all__ = [
    "Client",
    "AsyncClient",
    "ServiceRefused",
    "SessionInfo",
    "ExecuteResult",
    "RunInfo",
    "FileEntry",
    "SSEDecoder",
]


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
    error: dict[str, Any] | None
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


def _check(response: Any) -> Any:
    if response.status_code >= 400:
        try:
            message = response.json().get("error") or response.text
        except ValueError:
            message = response.text
        retry = response.headers.get("retry-after")
        raise ServiceRefused(response.status_code, str(message), float(retry) if retry else None)
    return response


def _json(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda response: parse(_check(response).json())


def _bytes(response: Any) -> bytes:
    return bytes(_check(response).content)


def _none(response: Any) -> None:
    _check(response)


def _files(data: dict[str, Any]) -> list[FileEntry]:
    return [FileEntry(**f) for f in data["files"]]


def _path(path: str) -> str:
    return quote(path, safe="/")


class _Api:
    """Every request the API knows: what to send, and how to read the answer."""

    def _send(self, method: str, url: str, parse: Callable[[Any], Any], **kw: Any) -> Any:
        raise NotImplementedError

    def create_session(
        self, *, kernel: str | None = None, ttl: float | None = None, **settings: Any
    ) -> Any:
        """A new session (``settings``: model, temperature, max_steps, cell_timeout)."""
        body = {"kernel": kernel, "ttl": ttl, **settings}
        return self._send(
            "POST",
            "/v1/sessions",
            _json(SessionInfo.parse),
            json={k: v for k, v in body.items() if v is not None},
        )

    def sessions(self) -> Any:
        return self._send(
            "GET", "/v1/sessions", _json(lambda d: [SessionInfo.parse(s) for s in d["sessions"]])
        )

    def session(self, sid: str) -> Any:
        return self._send("GET", f"/v1/sessions/{sid}", _json(SessionInfo.parse))

    def delete_session(self, sid: str) -> Any:
        return self._send("DELETE", f"/v1/sessions/{sid}", _none)

    def execute(self, sid: str, code: str, timeout: float | None = None) -> Any:
        body: dict[str, Any] = {"code": code}
        if timeout is not None:
            body["timeout"] = timeout
        return self._send(
            "POST", f"/v1/sessions/{sid}/execute", _json(ExecuteResult.parse), json=body
        )

    def upload(self, sid: str, path: str, content: bytes) -> Any:
        return self._send(
            "PUT",
            f"/v1/sessions/{sid}/files/{_path(path)}",
            _json(lambda d: d["size"]),
            content=content,
        )

    def download(self, sid: str, path: str) -> Any:
        return self._send("GET", f"/v1/sessions/{sid}/files/{_path(path)}", _bytes)

    def delete_file(self, sid: str, path: str) -> Any:
        return self._send("DELETE", f"/v1/sessions/{sid}/files/{_path(path)}", _none)

    def files(self, sid: str) -> Any:
        return self._send("GET", f"/v1/sessions/{sid}/files", _json(_files))

    def get_run(self, sid: str, run_id: str) -> Any:
        return self._send("GET", f"/v1/sessions/{sid}/runs/{run_id}", _json(RunInfo.parse))

    def start_run(self, sid: str, task: str) -> Any:
        """Start a run without following it; returns its RunInfo at once."""
        return self._send(
            "POST",
            f"/v1/sessions/{sid}/runs",
            _json(RunInfo.parse),
            json={"task": task},
            headers={"Accept": "application/json"},
        )

    def notebook(self, sid: str, *, clean: bool = False, format: str = "ipynb") -> Any:
        params = {"clean": str(clean).lower(), "format": format}
        return self._send("GET", f"/v1/sessions/{sid}/notebook", _bytes, params=params)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Client(_Api):
    """The blocking client. ``run()`` yields each event dict, then ``{"type": "result", ...}``."""

    def __init__(
        self, base_url: str, token: str | None = None, timeout: float = 300.0, **kw: Any
    ) -> None:
        self.http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout, **kw)

    def _send(self, method: str, url: str, parse: Callable[[Any], Any], **kw: Any) -> Any:
        return parse(self.http.request(method, url, **kw))

    def run(self, sid: str, task: str) -> Iterator[dict[str, Any]]:
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


class AsyncClient(_Api):
    """The asyncio client: every method is awaited; ``run()`` is an async iterator."""

    def __init__(
        self, base_url: str, token: str | None = None, timeout: float = 300.0, **kw: Any
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=_headers(token), timeout=timeout, **kw
        )

    async def _send(self, method: str, url: str, parse: Callable[[Any], Any], **kw: Any) -> Any:
        return parse(await self.http.request(method, url, **kw))

    async def run(self, sid: str, task: str) -> AsyncIterator[dict[str, Any]]:
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


def _frame(event: str, data: str) -> dict[str, Any]:
    """An SSE frame as a dict: run events keep their own type; the others are tagged."""
    body = json.loads(data)
    if event == "event":
        return dict(body)
    return {"type": event, **body}
