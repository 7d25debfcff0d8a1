"""The ``kernel-agent`` command (placeholder until the agent lands)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    print("kernel-agent: the agent CLI is not built yet", file=sys.stderr)
    return 2
