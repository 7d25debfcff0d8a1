"""``kernel-agent serve``: sessions over HTTP (an API, a web page), built on :class:`Session`.

app.py      the routes: HTTP to manager calls, errors to JSON
manager.py  hosted sessions, TTL culling, the index in the state dir
pool.py     warm pre-started kernels
runs.py     agent runs in their own tasks, events as JSON and SSE
limits.py   admission control and the service's errors
views.py    notebook downloads and the live HTML view
web.py      the web page
"""

from __future__ import annotations

from .app import create_app
from .manager import ServiceConfig, SessionManager

__all__ = ["create_app", "ServiceConfig", "SessionManager"]
