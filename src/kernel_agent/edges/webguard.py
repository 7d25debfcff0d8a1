"""What every kernel-agent HTTP server checks before a request reaches its app.

Shared by ``serve``, ``mcp --http`` and ``observe``:

- :class:`HostGuard` (ASGI middleware): the ``Host`` header must name this machine
  in a way DNS rebinding cannot (a loopback name or address; with a non-loopback bind,
  any IP literal or a name the operator listed), else 421. An ``Origin`` header, when
  present, must be the same origin as the request (or, for MCP clients, any loopback
  origin), else 403. ``Origin: null`` (a sandboxed frame, a ``file:`` page) is refused.
- :data:`NOTEBOOK_CSP` and :data:`DOWNLOAD_HEADERS`: how a page or file a kernel wrote
  is served, so that no script in it ever runs in the server's origin.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "NOTEBOOK_CSP",
    "DOWNLOAD_HEADERS",
    "HostGuard",
    "host_name",
    "host_allowed",
    "origin_allowed",
    "is_loopback_host",
]

#: rendered notebooks (kernel output): no script, nothing loaded, an opaque origin
NOTEBOOK_CSP = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"
)
#: headers for a file a kernel may have written: never rendered in the server's origin
DOWNLOAD_HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "X-Content-Type-Options": "nosniff",
}

_LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ::1)."""
    host = host.strip().lower().strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lowercased;
    None when the header is malformed (a port that is not a number, ``@``, spaces...)."""
    header = header.strip().lower()
    if not header or any(c in header for c in "@/\\ \t?#"):
        return None
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return None
        name, rest = header[1:end], header[end + 1 :]
    else:
        name, _, port = header.partition(":")
        rest = f":{port}" if _ else ""
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and len(rest) <= 6):
        return None
    return name or None


def host_allowed(header: str, *, loopback_only: bool, names: Iterable[str] = ()) -> bool:
    """Whether a request's ``Host`` cannot have come through DNS rebinding.

    A loopback name or address always passes; with ``loopback_only`` False, so does
    any IP literal (a rebinding page's Host is its domain name, never an address)
    and any of ``names`` (the operator's ``--allowed-host``).
    """
    name = host_name(header)
    if name is None:
        return False
    if name in _LOOPBACK_NAMES or name in {n.lower() for n in names}:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or not loopback_only


def origin_allowed(
    origin: str,
    host: str,
    *,
    same_origin: bool,
    loopback_only: bool,
    names: Iterable[str] = (),
) -> bool:
    """Whether a request's ``Origin`` may talk to this server.

    ``same_origin``: the origin must be ``http(s)://<the Host header>``. Otherwise any
    origin whose host passes :func:`host_allowed` (an MCP inspector on another port).
    """
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null", file:, chrome-extension:, garbage
    if same_origin:
        return parts.netloc.lower() == host.strip().lower()
    return host_allowed(parts.netloc, loopback_only=loopback_only, names=names)


class HostGuard:
    """ASGI middleware: refuse HTTP requests whose Host or Origin is foreign.

    ``loopback_only``: the server is bound to a loopback address (only loopback Hosts);
    ``names``: extra host names the operator allows; ``same_origin``: an Origin must
    match the Host exactly (the web pages of ``serve`` and ``observe``).
    """

    def __init__(
        self,
        app: Any,
        *,
        loopback_only: bool = True,
        names: Iterable[str] = (),
        same_origin: bool = True,
    ) -> None:
        self.app = app
        self.loopback_only = loopback_only
        self.names = frozenset(n.lower() for n in names)
        self.same_origin = same_origin

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.lower(): v for k, v in scope.get("headers") or []}
            host = headers.get(b"host", b"").decode("latin-1")
            if not host_allowed(host, loopback_only=self.loopback_only, names=self.names):
                await _refuse(send, 421, "this server does not answer to that Host name")
                return
            origin = headers.get(b"origin")
            if origin is not None and not origin_allowed(
                origin.decode("latin-1"),
                host,
                same_origin=self.same_origin,
                loopback_only=self.loopback_only,
                names=self.names,
            ):
                await _refuse(send, 403, "cross-origin requests are refused")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
