"""A running Jupyter server's REST API, as ``--jupyter-url`` uses it: :class:`JupyterServer`.

The few calls that attaching to a notebook takes, each a one-line
:class:`~kernel_agent.errors.JupyterError` (or ``AuthRefused``/``Unreachable``) when it
fails: the notebook's model (is it there), the server's session for the notebook's
path (its kernel; made when there is none), and the real-time collaboration session
that names the notebook's shared-document room (``jupyter-collaboration``).

Everything the server answers is checked for shape before it is used: a server is
the user's, but a kernel can reach it, so its answers are data, not trust.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from ..errors import AuthRefused, ConfigError, GatewayStatus, JupyterError, Unreachable, one_line
from ..executors.gateway_client import GatewayREST, ws_url

__all__ = ["JupyterServer", "TOKEN_ENV", "check_notebook_path"]

#: where the server's token is read from unless ``--jupyter-token-env`` names another
TOKEN_ENV = "JUPYTER_TOKEN"

#: an id the server gave (kernel, session, file): what may go into a URL path
_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def check_notebook_path(path: str) -> str:
    """``path`` as the server names it (``dir/name.ipynb``); a ConfigError if it cannot be one."""
    clean = path.strip().lstrip("/")
    parts = clean.split("/")
    if not clean.endswith(".ipynb") or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(
            f"--notebook must be a notebook path on the server, like dir/name.ipynb, got {path!r}"
        )
    if any(ord(c) < 32 for c in clean):
        raise ConfigError("--notebook holds a control character")
    return clean


def _id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise JupyterError(f"the Jupyter server answered a malformed {what}")
    return value


class JupyterREST(GatewayREST):
    """GatewayREST with a Jupyter server's words for its failures."""

    def auth_failure(self, code: int, detail: str = "") -> AuthRefused:
        what = "a wrong token" if self.token else "no token"
        return AuthRefused(
            f"the Jupyter server at {self.url} refused {what} (HTTP {code}): put the server's "
            f"token in {TOKEN_ENV} (or the variable --jupyter-token-env names)"
        )

    def unreachable(self, reason: object) -> Unreachable:
        return Unreachable(
            f"cannot reach the Jupyter server at {self.url}: {one_line(str(reason))}"
        )


class JupyterServer:
    """One Jupyter server (``url``, ``token``) and one of its notebooks (``path``)."""

    def __init__(self, url: str, token: str | None, path: str, request_timeout: float = 30.0):
        self.rest = JupyterREST(url, token, request_timeout)
        self.url = self.rest.url
        self.token = token
        self.path = check_notebook_path(path)

    @property
    def headers(self) -> dict[str, str]:
        return self.rest.headers

    def ws(self, path: str) -> str:
        return ws_url(self.url, path)

    async def _call(self, method: str, path: str, body: Any = None, what: str = "") -> Any:
        try:
            return await self.rest.call(method, path, body)
        except GatewayStatus as exc:
            raise JupyterError(
                f"the Jupyter server at {self.url} {what or 'failed'}: {exc.message}"
            ) from None

    async def check_notebook(self) -> None:
        """Fail unless the server has a notebook at :attr:`path`."""
        try:
            model = await self.rest.call("GET", f"/api/contents/{quote(self.path)}?content=0")
        except GatewayStatus as exc:
            if exc.code == 404:
                raise JupyterError(
                    f"the Jupyter server at {self.url} has no notebook {self.path!r}"
                ) from None
            raise JupyterError(
                f"the Jupyter server at {self.url} failed to report {self.path!r}: {exc.message}"
            ) from None
        if not isinstance(model, dict) or model.get("type") != "notebook":
            raise JupyterError(f"{self.path!r} on the Jupyter server is not a notebook")

    async def notebook_kernel(self, kernel_name: str | None) -> tuple[str, str]:
        """The kernel of the server's session for the notebook: ``(kernel_id, name)``.

        A session the server has for the path (the one JupyterLab opened) is used as it
        is; with none, one is made (with ``kernel_name``, else the server's default).
        """
        sessions = await self._call("GET", "/api/sessions", what="failed to list its sessions")
        for session in sessions if isinstance(sessions, list) else []:
            if not isinstance(session, dict) or session.get("path") != self.path:
                continue
            kernel = session.get("kernel")
            if isinstance(kernel, dict) and kernel.get("id"):
                return _id(kernel["id"], "kernel id"), str(kernel.get("name") or "")
        body: dict[str, Any] = {"path": self.path, "type": "notebook", "name": ""}
        body["kernel"] = {"name": kernel_name} if kernel_name else {}
        made = await self._call(
            "POST", "/api/sessions", body, what=f"could not start a kernel for {self.path!r}"
        )
        kernel = made.get("kernel") if isinstance(made, dict) else None
        if not isinstance(kernel, dict):
            raise JupyterError(f"the Jupyter server at {self.url} made a session with no kernel")
        return _id(kernel.get("id"), "kernel id"), str(kernel.get("name") or "")

    async def room_url(self) -> str:
        """The websocket URL of the notebook's shared document (jupyter-collaboration)."""
        try:
            room = await self.rest.call(
                "PUT",
                f"/api/collaboration/session/{quote(self.path)}",
                {"format": "json", "type": "notebook"},
            )
        except GatewayStatus as exc:
            if exc.code == 404:
                raise JupyterError(
                    f"the Jupyter server at {self.url} has no real-time collaboration: "
                    "pip install jupyter-collaboration in the server's environment"
                ) from None
            raise JupyterError(
                f"the Jupyter server at {self.url} refused a shared document for "
                f"{self.path!r}: {exc.message}"
            ) from None
        if not isinstance(room, dict):
            raise JupyterError("the Jupyter server answered a malformed collaboration session")
        file_id = _id(room.get("fileId"), "file id")
        session_id = _id(room.get("sessionId"), "collaboration session id")
        fmt, kind = _id(room.get("format"), "format"), _id(room.get("type"), "type")
        return self.ws(f"/api/collaboration/room/{fmt}:{kind}:{file_id}?sessionId={session_id}")
