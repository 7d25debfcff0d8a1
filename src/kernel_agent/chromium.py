"""Headless Chromium: screenshots and PDFs of exported HTML.

Uses the system browser (Debian's ``chromium``; ``make system-deps-chromium``
installs it), or the one named by ``KERNEL_AGENT_CHROMIUM``. Every run gets a
throw-away profile directory and no background networking, so it behaves the
same on a developer's machine and in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import ExportError, one_line

__all__ = ["find_chromium", "screenshot", "print_pdf", "CHROMIUM_FLAGS"]

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: Flags for a quiet, reproducible headless run (root in a container needs no-sandbox).
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


def _run(html: Path, out: Path, action: list[str], timeout: float) -> Path:
    binary = find_chromium()
    if binary is None:
        raise ExportError(
            "Chromium is not installed (apt-get install chromium, or make system-deps-chromium)"
        )
    html, out = Path(html).resolve(), Path(out).resolve()
    if not html.is_file():
        raise ExportError(f"no such HTML file: {html}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kernel-agent-chromium-") as profile:
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *action, html.as_uri()]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise ExportError(f"Chromium took longer than {timeout:g} s on {html.name}") from None
    if not out.is_file() or out.stat().st_size == 0:
        errors = [line for line in proc.stderr.splitlines() if "ERROR" in line or "error" in line]
        detail = one_line(errors[-1]) if errors else f"exit status {proc.returncode}"
        raise ExportError(f"Chromium did not write {out.name}: {detail}")
    return out


def screenshot(
    html: str | Path,
    png: str | Path,
    window_size: tuple[int, int] = (1200, 1600),
    timeout: float = 60,
) -> Path:
    """Render ``html`` and save what a ``window_size`` window shows as ``png``."""
    width, height = window_size
    return _run(
        Path(html),
        Path(png),
        [f"--screenshot={Path(png).resolve()}", f"--window-size={width},{height}"],
        timeout,
    )


def print_pdf(html: str | Path, pdf: str | Path, timeout: float = 120) -> Path:
    """Print ``html`` to ``pdf`` without Chromium's header and footer."""
    return _run(
        Path(html),
        Path(pdf),
        [
            f"--print-to-pdf={Path(pdf).resolve()}",
            "--no-pdf-header-footer",
            "--print-to-pdf-no-header",
        ],
        timeout,
    )
