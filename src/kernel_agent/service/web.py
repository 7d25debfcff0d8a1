"""The web page: a session list, and a session page with its live notebook and a task box.

Plain server-rendered HTML and a little JavaScript. The token comes from a login
form or ``?token=``; either sets an HttpOnly, SameSite=Strict cookie that the API
also accepts, so the page's ``fetch`` calls need no token in JavaScript. The cookie
holds a value derived from the token, never the token (cookies reach every port of
a host).

The notebook a kernel wrote is shown in a sandboxed frame, served with a CSP that
runs no script: a ``<script>`` in a cell's output cannot use the operator's cookie.
"""

from __future__ import annotations

import hmac
import html
import time
from urllib.parse import parse_qs, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..edges.webguard import NOTEBOOK_CSP
from .manager import SessionManager

__all__ = ["COOKIE", "add_pages", "login_page", "login_redirect"]

#: the login cookie: the page sets it, the API's auth (:mod:`.app`) reads it
COOKIE = "kernel_agent_session"

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{background:#24292f;color:#fff;padding:8px 16px}header a{color:#fff;text-decoration:none}
main{padding:12px 16px}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}
.live{color:#1a7f37}.ending,.expired,.ended{color:#888}
#cols{display:flex;gap:12px}#nb{flex:3;height:80vh;border:1px solid #ccc}
#side{flex:2;display:flex;flex-direction:column;gap:8px}
#events{background:#f6f8fa;border:1px solid #ddd;height:60vh;overflow:auto;white-space:pre-wrap;
font:12px monospace;padding:6px;margin:0}
textarea{width:100%;box-sizing:border-box}
"""


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><header><a href='/'>kernel-agent</a> · "
        f"{html.escape(title)}</header><main>{body}</main></body></html>",
        status_code=status,
    )


def login_page(status: int = 200, error: str = "") -> HTMLResponse:
    note = f"<p style='color:#b00'>{html.escape(error)}</p>" if error else ""
    return _page(
        "log in",
        f"{note}<form method='post' action='/login'><label>Token "
        "<input type='password' name='token' autofocus></label> <button>Log in</button></form>",
        status,
    )


def _with_cookie(response: Response, cookie: str) -> Response:
    response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", path="/")
    return response


def same_site_path(path: str) -> str:
    """``path`` as a redirect target that stays on this server: one leading ``/``, never
    ``//host`` or ``/\\host`` (which browsers read as another host)."""
    return "/" + path.lstrip("/\\")


def login_redirect(request: Request, cookie: str) -> Response:
    """Drop ``?token=`` from the address (the login is in the cookie) and come back."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    query = urlencode(params)
    target = same_site_path(request.url.path) + (f"?{query}" if query else "")
    return _with_cookie(RedirectResponse(target, status_code=303), cookie)


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


_SESSION_JS = """
const sid = document.body.dataset.sid;
let cells = -1;
async function refresh() {
  const r = await fetch(`/v1/sessions/${sid}`);
  if (!r.ok) return;
  const s = await r.json();
  document.getElementById('status').textContent =
    `${s.status} · ${s.cells} cells · TTL left ${Math.round(s.ttl_left_s)} s`;
  if (s.cells !== cells) {
    cells = s.cells;
    document.getElementById('nb').src = `/sessions/${sid}/view?cells=${cells}`;
  }
}
setInterval(refresh, 1000); refresh();
function show(line) {
  const pre = document.getElementById('events');
  pre.textContent += line; pre.scrollTop = pre.scrollHeight;
}
function describe(e) {
  switch (e.type) {
    case 'ModelDelta': return e.text;
    case 'CellStarted': return `\\n▶ cell ${e.step}:\\n${e.code}\\n`;
    case 'CellFinished': return `\\n■ cell ${e.step} ${e.result.status}\\n`;
    case 'Answer': return `\\n✔ ${e.text}\\n`;
    case 'RunFinished': return `\\n[run ${e.result.status}]\\n`;
    case 'Notice': return `\\n(${e.text})\\n`;
    case 'RunStarted': return `[${e.model}] ${e.task}\\n`;
    default: return '';
  }
}
async function follow(r) {
  if (!r.ok) { show(`error ${r.status}: ${(await r.json()).error}\\n`); return; }
  const reader = r.body.getReader(); const dec = new TextDecoder(); let buf = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += dec.decode(value, {stream: true});
    let cut;
    while ((cut = buf.indexOf('\\n\\n')) >= 0) {
      const frame = buf.slice(0, cut); buf = buf.slice(cut + 2);
      const kind = (frame.match(/^event: (.*)$/m) || [])[1];
      const data = (frame.match(/^data: (.*)$/m) || [])[1];
      if (kind === 'event') show(describe(JSON.parse(data)));
      if (kind === 'result') {
        const res = JSON.parse(data); show(`\\n[${res.status}]\\n`); refresh();
      }
    }
  }
}
document.getElementById('run').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const task = document.getElementById('task').value.trim();
  if (!task) return;
  document.getElementById('events').textContent = '';
  await follow(await fetch(`/v1/sessions/${sid}/runs`, {method: 'POST',
    headers: {'Content-Type': 'application/json', 'Accept': 'text/event-stream'},
    body: JSON.stringify({task})}));
});
(async () => {  // show the latest run, live if it is still going
  const s = await (await fetch(`/v1/sessions/${sid}`)).json();
  if (s.runs && s.runs.length) {
    const last = s.runs[s.runs.length - 1];
    await follow(await fetch(`/v1/sessions/${sid}/runs/${last}/events`));
  }
})();
"""


def add_pages(app: FastAPI, manager: SessionManager) -> None:
    token = app.state.config.token

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        given = (form.get("token") or [""])[0]
        if token is None or hmac.compare_digest(given.encode(), token.encode()):
            return _with_cookie(RedirectResponse("/", status_code=303), app.state.cookie)
        return login_page(status=401, error="That token is not right.")

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        now = time.time()
        rows = []
        for h in sorted(manager.sessions.values(), key=lambda h: -h.created):
            info = h.info()
            rows.append(
                f"<tr><td><a href='/sessions/{h.id}'>{h.id}</a></td>"
                f"<td>{html.escape(h.kernel)}</td><td>{_ago(now - h.created)}</td>"
                f"<td>{_ago(info['ttl_left_s']) if h.session else '-'}</td>"
                f"<td>{info['cells']}</td><td class='{h.status}'>{h.status}"
                f"{' (busy)' if info['busy'] else ''}</td></tr>"
            )
        table = (
            "<table><tr><th>session</th><th>kernel</th><th>age</th><th>TTL left</th><th>cells</th>"
            f"<th>status</th></tr>{''.join(rows)}</table>"
            if rows else "<p>No sessions yet. Create one with <code>POST /v1/sessions</code>.</p>"
        )  # fmt: skip
        pool = (
            f"warm pool: {manager.pool.ready}/{manager.pool.size} · " if manager.pool.size else ""
        )
        return _page("sessions", f"<p>{pool}{manager.live_count()} live</p>{table}")

    @app.get("/sessions/{sid}", include_in_schema=False)
    async def session_page(sid: str) -> HTMLResponse:
        hosted = manager.get(sid)
        sid_html = html.escape(hosted.id)
        body = (
            f"<p id='status'>{html.escape(hosted.status)}</p><div id='cols'>"
            "<iframe id='nb' sandbox title='notebook'></iframe><div id='side'>"
            "<form id='run'>"
            "<textarea id='task' rows='3' placeholder='a task for the agent'></textarea>"
            "<button>Run</button></form><pre id='events'></pre>"
            f"<p><a href='/v1/sessions/{sid_html}/notebook'>notebook</a> · "
            f"<a href='/v1/sessions/{sid_html}/notebook?clean=true'>clean</a> · "
            f"<a href='/v1/sessions/{sid_html}/notebook?format=html&amp;clean=true'>HTML</a></p>"
            f"</div></div><script>{_SESSION_JS}</script>"
        )
        page = _page(f"session {hosted.id}", body)
        page.body = bytes(page.body).replace(b"<body>", f"<body data-sid='{sid_html}'>".encode(), 1)
        page.headers["content-length"] = str(len(page.body))
        return page

    @app.get("/sessions/{sid}/view", include_in_schema=False)
    async def session_view(sid: str) -> HTMLResponse:
        from .views import live_html

        return HTMLResponse(
            await live_html(manager, sid),
            headers={"Content-Security-Policy": NOTEBOOK_CSP, "X-Content-Type-Options": "nosniff"},
        )
