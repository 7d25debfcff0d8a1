"""Headless Chromium: PDFs and screenshots of HTML that came out of a kernel.

Uses the system browser (Debian's ``chromium``; ``make system-deps-chromium``
installs it), or the one named by ``KERNEL_AGENT_CHROMIUM``.

The HTML holds what kernels displayed, so it is rendered where it cannot act:

- **not root**: as root, Chromium runs as a leased sandbox uid (``nobody`` when none
  can be leased) through ``setpriv`` with no capabilities and ``no_new_privs``, with
  Chromium's own (user-namespace) sandbox on: never ``--no-sandbox`` as root. As
  another user it runs as that user, sandboxed; where the sandbox cannot start it is
  retried without it (still unprivileged) and a warning says why;
- **not from a file**: the page is handed over the DevTools pipe
  (``Page.setDocumentContent`` into ``about:blank``), so it has no ``file://`` origin
  and no file of the host can be framed or fetched;
- **no JavaScript**: ``--blink-settings=scriptEnabled=false``, script execution
  disabled over DevTools, and a Content-Security-Policy ``<meta>``
  (:data:`RENDER_CSP`) put first in the page;
- **no network**: every request the page makes is paused over DevTools and failed
  (and counted), behind a dead proxy and a resolver that resolves nothing.

The PDF or PNG comes back over the pipe: Chromium writes no file the host reads. The
profile is a throw-away directory of the render uid, removed afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import BrowserSandboxUnavailable, ExportError, one_line
from .cdp import Message, Pipe

__all__ = [
    "find_chromium",
    "screenshot",
    "print_pdf",
    "render_pdf",
    "render_png",
    "with_csp",
    "Rendered",
    "CHROMIUM_FLAGS",
    "RENDER_FLAGS",
    "RENDER_CSP",
]

log = logging.getLogger(__name__)

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: Flags for driving a browser at our own pages in tests (root in a container needs
#: no-sandbox there). Kernel HTML is never rendered with these: see RENDER_FLAGS.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)

#: Flags for rendering kernel HTML (no --no-sandbox; the pipe, not a port).
RENDER_FLAGS = (
    "--headless",
    "--remote-debugging-pipe",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--blink-settings=scriptEnabled=false",
    # no network: a proxy that is not there (also for loopback), and no names resolved
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)

#: The policy every rendered page gets: inline styles and data: images, nothing else.
RENDER_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_REFRESH = re.compile(r"(<meta\b[^>]*?)\bhttp-equiv(?=\s*=\s*[\"']?\s*refresh)", re.I)
_SANDBOX_FAILED = re.compile(r"no usable sandbox|sandbox.*(fail|not|unable)", re.I)
# runs as the caller, before setpriv: put the DevTools pipe on fds 3 and 4
_TRAMPOLINE = (
    "import os,sys;r,w=int(sys.argv[1]),int(sys.argv[2]);os.dup2(r,3);os.dup2(w,4);"
    "os.close(r);os.close(w);os.execvp(sys.argv[3],sys.argv[3:])"
)


def find_chromium() -> str | None:
    """The path of a Chromium binary, or None."""
    explicit = os.environ.get("KERNEL_AGENT_CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def with_csp(html: str, policy: str = RENDER_CSP) -> str:
    """``html`` with a Content-Security-Policy ``<meta>`` as the first thing in its head.

    The page's own ``<meta http-equiv="refresh">`` tags are disarmed first: CSP does
    not stop them, and a page that navigates away (even to ``about:blank``) while it
    is printed fails the print. (Availability only: a refresh that slips past this
    still fetches nothing, and the print fails with a clear error.)
    """
    html = _REFRESH.sub(lambda m: m.group(1) + "data-disarmed-http-equiv", html)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    head = re.search(r"<head(\s[^>]*)?>", html[:4096], re.I)
    if head is not None:
        return html[: head.end()] + meta + html[head.end() :]
    return meta + html  # a parser puts a leading <meta> in the implied head


@dataclass
class Rendered:
    """What a render gave: the bytes, and what the page tried that was refused."""

    data: bytes
    blocked: list[str] = field(default_factory=list)
    sandboxed: bool = True
    uid: int = -1


def render_pdf(html: str, *, timeout: float = 120) -> Rendered:
    """``html`` printed to PDF (Letter, backgrounds, no header or footer)."""
    return _render(html, timeout, _print)


def render_png(
    html: str, window_size: tuple[int, int] = (1200, 1600), *, timeout: float = 60
) -> Rendered:
    """What a ``window_size`` window shows of ``html``, as PNG."""
    width, height = window_size

    def shoot(pipe: Pipe, session: str) -> str:
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        return str(pipe.call("Page.captureScreenshot", {"format": "png"}, session)["data"])

    return _render(html, timeout, shoot)


def screenshot(
    html: str | Path,
    png: str | Path,
    window_size: tuple[int, int] = (1200, 1600),
    timeout: float = 60,
) -> Path:
    """Render the HTML file ``html`` and save what a ``window_size`` window shows as ``png``."""
    page = _read_page(Path(html))
    return _save(render_png(page, window_size, timeout=timeout).data, Path(png))


def print_pdf(html: str | Path, pdf: str | Path, timeout: float = 120) -> Path:
    """Print the HTML file ``html`` to ``pdf`` without a header and footer."""
    page = _read_page(Path(html))
    return _save(render_pdf(page, timeout=timeout).data, Path(pdf))


def _read_page(html: Path) -> str:
    if not html.is_file():
        raise ExportError(f"no such HTML file: {html.resolve()}")
    return html.read_text(encoding="utf-8", errors="replace")


def _save(data: bytes, out: Path) -> Path:
    from ..edges.safefs import write_beneath

    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    write_beneath(out.parent, out.name, data)
    return out


def _print(pipe: Pipe, session: str) -> str:
    params = {"printBackground": True, "displayHeaderFooter": False}
    return str(pipe.call("Page.printToPDF", params, session)["data"])


# ------------------------------------------------------------------ the browser
def _render(html: str, timeout: float, action: Any) -> Rendered:
    binary = find_chromium()
    if binary is None:
        raise ExportError(
            "Chromium is not installed (apt-get install chromium, or make system-deps-chromium)"
        )
    deadline = time.monotonic() + timeout
    page = with_csp(html)
    from ..sandbox.uids import leased_user

    with leased_user("Chromium") as uid:
        try:
            return _render_once(binary, uid, page, deadline, action, sandbox=True)
        except BrowserSandboxUnavailable as exc:  # never root here: keep the uid
            log.warning(
                "Chromium's sandbox does not start here (%s); rendering as unprivileged uid %d "
                "without it",
                exc,
                uid if uid >= 0 else os.geteuid(),
            )
            rendered = _render_once(binary, uid, page, deadline, action, sandbox=False)
            rendered.sandboxed = False
            return rendered


def _render_once(
    binary: str, uid: int, page: str, deadline: float, action: Any, *, sandbox: bool
) -> Rendered:
    profile = Path(tempfile.mkdtemp(prefix="kernel-agent-chromium-"))
    stderr = tempfile.TemporaryFile()
    cmd_r, cmd_w = os.pipe()
    out_r, out_w = os.pipe()
    # the child's ends above fd 9, so moving them to 3 and 4 never clobbers one
    child_r = _high_fd(cmd_r)
    child_w = _high_fd(out_w)
    proc: subprocess.Popen[bytes] | None = None
    try:
        if uid >= 0:
            os.chown(profile, uid, uid)
        flags = [*RENDER_FLAGS, *(() if sandbox else ("--no-sandbox",))]
        argv = [
            sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(child_r), str(child_w),
            *_drop_to(uid), binary, *flags, f"--user-data-dir={profile}", "about:blank",
        ]  # fmt: skip
        proc = subprocess.Popen(
            argv,
            pass_fds=(child_r, child_w),
            env=_render_env(profile),
            cwd=profile,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        for fd in (child_r, child_w):
            os.close(fd)
        child_r = child_w = -1
        rendered = Rendered(b"", uid=uid if uid >= 0 else os.geteuid(), sandboxed=sandbox)
        pipe = Pipe(cmd_w, out_r, deadline=deadline, on_event=_Blocker(rendered.blocked))
        try:
            data = _drive(pipe, page, action)
        except ExportError as exc:
            detail = _stderr_tail(stderr)
            if sandbox and _SANDBOX_FAILED.search(detail):
                raise BrowserSandboxUnavailable(detail) from None
            raise ExportError(f"{exc}{': ' + detail if detail else ''}") from None
        with contextlib.suppress(ExportError):
            pipe.send("Browser.close")
        rendered.data = data
        return rendered
    finally:
        for fd in (cmd_r, cmd_w, out_r, out_w, child_r, child_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if proc is not None:
            _stop(proc)
        stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


def _drive(pipe: Pipe, page: str, action: Any) -> bytes:
    """Open the page in the browser's first tab, let it load, and run ``action`` on it."""
    pipe.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
    targets = pipe.call("Target.getTargets").get("targetInfos", [])
    tab = next((t["targetId"] for t in targets if t.get("type") == "page"), None)
    if tab is None:
        tab = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = str(
        pipe.call("Target.attachToTarget", {"targetId": tab, "flatten": True})["sessionId"]
    )
    # the browser's Fetch sees navigations and other frames, the tab's its subresources
    pipe.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
    pipe.call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
    pipe.call("Page.enable", {}, session)
    frame = pipe.call("Page.getFrameTree", {}, session)["frameTree"]["frame"]["id"]
    sent = pipe.send("Page.setDocumentContent", {"frameId": frame, "html": page}, session)
    # the page's own load: the first load event after it was opened (not about:blank's)
    for event in ("Page.documentOpened", "Page.loadEventFired"):
        message = pipe.wait(
            lambda m, e=event: (
                (m.get("id") == sent and "error" in m)  # type: ignore[misc]
                or (m.get("method") == e and m.get("sessionId") == session)
            )
        )
        if "error" in message:
            raise ExportError(f"Chromium refused the page: {message['error']}")
    pipe.call("Page.stopLoading", {}, session)  # a refresh scheduled at load never comes
    encoded = action(pipe, session)
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError:
        raise ExportError("Chromium sent back something that is not base64") from None


class _Blocker:
    """Refuses every request a page makes, and keeps its URL."""

    def __init__(self, blocked: list[str]) -> None:
        self.blocked = blocked

    def __call__(self, pipe: Pipe, message: Message) -> None:
        if message.get("method") != "Fetch.requestPaused":
            return
        params = message.get("params") or {}
        url = str((params.get("request") or {}).get("url", ""))[:200]
        if len(self.blocked) < 100 and url not in self.blocked:
            self.blocked.append(url)
        session = str(message.get("sessionId") or "")
        if params.get("resourceType") == "Document":
            # a navigation (meta refresh, a frame): "204 No Content" keeps the page as it
            # is, where a failure would replace it with an error page
            reply = {"requestId": params.get("requestId"), "responseCode": 204}
            pipe.send("Fetch.fulfillRequest", reply, session)
        else:
            reply = {"requestId": params.get("requestId"), "errorReason": "BlockedByClient"}
            pipe.send("Fetch.failRequest", reply, session)


def _high_fd(fd: int) -> int:
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def _drop_to(uid: int) -> list[str]:
    from ..sandbox.uids import drop_argv

    try:
        return drop_argv(uid)
    except OSError as exc:
        raise ExportError(str(exc)) from None


def _render_env(profile: Path) -> dict[str, str]:
    """What Chromium sees of the environment: no keys, no tokens, a home of its own."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(profile),
        "TMPDIR": str(profile),
        "XDG_CONFIG_HOME": str(profile / "config"),
        "XDG_CACHE_HOME": str(profile / "cache"),
        "LANG": "C.UTF-8",
    }


def _stderr_tail(stderr: IO[bytes]) -> str:
    """The line of Chromium's stderr that says why it failed: a FATAL one, else the last
    ERROR (D-Bus and crash-reporter noise left out)."""
    stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, stderr.tell() - 16384))
    lines = stderr.read().decode("utf-8", "replace").splitlines()
    fatal = [line for line in lines if "FATAL" in line]
    errors = [
        line for line in lines if "ERROR" in line and "dbus" not in line and "crashpad" not in line
    ]
    chosen = (fatal or errors or [""])[-1]
    return one_line(chosen, 400)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
