#!/usr/bin/env python3
"""Render an exported HTML page (or a notebook, exported first) to a PNG with headless Chromium.

    python scripts/render_html.py report.html shot.png [--window-size 1200,1600]
    python scripts/render_html.py analysis.ipynb shot.png

Needs Debian's chromium (``make system-deps-chromium``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="an .html file, or an .ipynb to export first")
    parser.add_argument("png", type=Path, help="where to write the screenshot")
    parser.add_argument("--window-size", default="1200,1600", help="WIDTH,HEIGHT (1200,1600)")
    args = parser.parse_args(argv)

    from kernel_agent.errors import KernelAgentError
    from kernel_agent.notebook.chromium import screenshot

    width, height = (int(v) for v in args.window_size.split(","))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            page = args.page
            if page.suffix == ".ipynb":
                from kernel_agent.notebook.export import export_notebook

                page = export_notebook(page, to="html", output=Path(tmp) / f"{page.stem}.html")
            screenshot(page, args.png, window_size=(width, height))
    except KernelAgentError as exc:
        print(f"render_html: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
