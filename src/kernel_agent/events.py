"""The typed events an agent run yields. The CLI, the magic and tests consume them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .llm.stream import Usage
from .results import CellResult

__all__ = [
    "Event",
    "RunStarted",
    "ModelDelta",
    "ModelRetracted",
    "ModelReply",
    "CellStarted",
    "CellOutput",
    "CellFinished",
    "CellSkipped",
    "Notice",
    "Answer",
    "RunFinished",
    "RunResult",
    "Usage",
]


@dataclass
class RunResult:
    """What ``Agent.run_to_end`` returns."""

    answer: str
    status: str  # "ok" | "failed" | "max_steps" | "interrupted" | "error"
    notebook: Path | None
    cells: list[CellResult] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(reported=False))
    duration_s: float = 0.0
    model_time_s: float = 0.0
    kernel_time_s: float = 0.0
    clean_notebook: Path | None = None
    verify: dict[str, Any] | None = None
    #: what isolated the kernel: "bwrap", "none" (unsandboxed), "remote" or "unknown"
    isolation: str = "unknown"
    #: files the kernel wrote, delivered beside the notebook (``<notebook>_files/work/``)
    files: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "status": self.status,
            "notebook": str(self.notebook) if self.notebook else None,
            "clean_notebook": str(self.clean_notebook) if self.clean_notebook else None,
            "cells": [
                {
                    "code": c.code,
                    "status": c.status,
                    "execution_count": c.execution_count,
                    "duration_s": round(c.duration, 4),
                    "error": str(c.error) if c.error else None,
                }
                for c in self.cells
            ],
            "usage": self.usage.as_dict(),
            "duration_s": round(self.duration_s, 3),
            "model_time_s": round(self.model_time_s, 3),
            "kernel_time_s": round(self.kernel_time_s, 3),
            "verify": self.verify,
            "isolation": self.isolation,
            "files": [str(f) for f in self.files],
        }


class Event:
    """Base class of everything ``Agent.run`` yields."""


@dataclass
class RunStarted(Event):
    task: str
    model: str
    protocol: str
    notebook: Path | None
    sandbox: str


@dataclass
class ModelDelta(Event):
    """A piece of the model's reply as it streams."""

    text: str


@dataclass
class ModelRetracted(Event):
    """The reply streamed so far is void: a retry streams it again from the start."""


@dataclass
class ModelReply(Event):
    """The model's whole reply for one turn (prose, without the code it asked to run)."""

    text: str
    step: int


@dataclass
class CellStarted(Event):
    step: int
    code: str


@dataclass
class CellOutput(Event):
    """An output piece while a cell runs (a stream chunk, a display, an error)."""

    step: int
    output: Any


@dataclass
class CellFinished(Event):
    step: int
    result: CellResult


@dataclass
class CellSkipped(Event):
    step: int
    code: str


@dataclass
class Notice(Event):
    """Something a user should see: a restart, a state rebuild, an unsandboxed kernel."""

    text: str
    level: str = "info"  # "info" | "warning"


@dataclass
class Answer(Event):
    text: str


@dataclass
class RunFinished(Event):
    result: RunResult
