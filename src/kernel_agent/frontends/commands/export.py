"""``kernel-agent export NOTEBOOK --to html|markdown|pdf [-o OUT]``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a notebook to HTML, Markdown or PDF with a provenance header",
        description="Export NOTEBOOK with nbconvert. HTML is one self-contained file (images "
        "embedded); Markdown writes its images into NAME_md_files/ beside it; PDF needs Chromium, "
        "playwright, or xelatex and pandoc.",
    )
    parser.add_argument("notebook", metavar="NOTEBOOK", type=Path, help="the .ipynb to export")
    parser.add_argument(
        "--to", choices=("html", "markdown", "pdf"), default="html", help="output format (html)"
    )
    parser.add_argument("-o", "--output", metavar="OUT", help="output file or directory")
    parser.add_argument(
        "--no-provenance", action="store_true", help="leave out the provenance header"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ...notebook.export import export_notebook

    out = export_notebook(
        args.notebook, to=args.to, output=args.output, provenance=not args.no_provenance
    )
    print(out)
    return 0
