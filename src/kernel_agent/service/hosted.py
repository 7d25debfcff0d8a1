"""A session as the service knows it (:class:`Hosted`), and how its cells are counted."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..session import Session
from ..settings import Settings
from .runs import HostedRun

__all__ = ["Hosted", "code_cells", "count_cells"]


@dataclass
class Hosted:
    """A session as the service knows it; ``session`` is None once it has ended."""

    id: str
    kernel: str
    ttl: float
    notebook: Path
    created: float = field(default_factory=time.time)
    last_active: float = field(default_factory=time.time)
    status: str = "live"  # live | ending (being finalised) | expired | ended
    ended: float | None = None
    reason: str | None = None
    session: Session | None = None
    settings: Settings | None = None
    work_dir: str | None = None
    cells: int = 0
    busy: int = 0
    runs: dict[str, HostedRun] = field(default_factory=dict)
    sandbox: str = ""
    #: the execute requests running in this session now (cancelled by DELETE)
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)
    deleted: bool = False
    #: uploads check the session's room and write under this lock (one at a time)
    upload_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: (monotonic time, bytes) of the work dir's last walk, plus what uploads added since
    usage: tuple[float, int] | None = None

    @property
    def files_archive(self) -> Path:
        """Where the kernel's files are kept once the session has ended: one archive."""
        return self.notebook.parent / f"{self.notebook.stem}_files" / "work.zip"

    @property
    def clean_notebook(self) -> Path:
        from ..notebook.clean import clean_path_for

        return clean_path_for(self.notebook)

    def info(self) -> dict[str, Any]:
        now = time.time()
        live = self.session is not None
        transcript = self.session.transcript if self.session is not None else None
        cells = code_cells(transcript.cells) if transcript is not None else self.cells
        return {
            "id": self.id,
            "status": self.status,
            "kernel": self.kernel,
            "sandbox": self.sandbox,
            "created": self.created,
            "last_active": self.last_active,
            "age_s": round(now - self.created, 1),
            "ttl_s": self.ttl,
            "ttl_left_s": round(max(0.0, self.last_active + self.ttl - now), 1) if live else 0.0,
            "cells": cells,
            "busy": self.busy > 0,
            "ended": self.ended,
            "reason": self.reason,
            "runs": [r.id for r in self.runs.values()],
        }

    def index_entry(self) -> dict[str, Any]:
        entry = self.info()
        entry.update(notebook=str(self.notebook), work_dir=self.work_dir)
        return entry


def count_cells(notebook: Path, default: int) -> int:
    """The cells in a notebook a crashed server left (its index was saved before them)."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells")
    except (OSError, ValueError, AttributeError, RecursionError):
        return default
    return code_cells(cells) if isinstance(cells, list) else default


def code_cells(cells: list[Any]) -> int:
    """How many of ``cells`` are code cells: a session's "cells" are its executions (a
    run's task, prose and answer are markdown cells in the same notebook)."""
    return sum(1 for c in cells if isinstance(c, dict) and c.get("cell_type") == "code")
