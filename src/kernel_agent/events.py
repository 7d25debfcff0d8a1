"""The typed events an agent run yields. The CLI, the magic and tests consume them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from .llm.stream import Completion, Usage, tokens_text
from .results import CellResult

if TYPE_CHECKING:
    from .executors.base import IsolationMode

__all__ = [
    "Event",
    "EventBase",
    "EventHandlers",
    "RunStarted",
    "ModelDelta",
    "ModelRetracted",
    "ModelReply",
    "ModelCalled",
    "StateRebuilt",
    "CellStarted",
    "CellOutput",
    "CellFinished",
    "CellSkipped",
    "Notice",
    "Answer",
    "RunFinished",
    "RunResult",
    "RunStatus",
    "Usage",
    "tokens_text",
]


#: how a run ended; "no_answer" means the model kept repeating itself
RunStatus: TypeAlias = Literal[
    "ok", "no_code", "failed", "max_steps", "no_answer", "budget", "stopped", "interrupted", "error"
]


@dataclass
class RunResult:
    """What ``Agent.run_to_end`` returns."""

    answer: str
    status: RunStatus
    notebook: Path | None
    cells: list[CellResult] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(source=""))
    duration_s: float = 0.0
    model_time_s: float = 0.0
    kernel_time_s: float = 0.0
    clean_notebook: Path | None = None
    verify: dict[str, Any] | None = None
    #: what isolated the kernel: "bwrap", "none" (unsandboxed), "remote" or "unknown"
    isolation: IsolationMode = "unknown"
    #: the files ``set_result`` declared that are inert data, copied flat beside the notebook
    #: (``<notebook>_files/result/``); without a declared result, the one archive of the
    #: files the kernel wrote (``<notebook>_files/work.zip``)
    files: list[Path] = field(default_factory=list)
    #: the data the kernel's code declared with ``set_result`` (JSON), or None
    result: Any = None
    #: US dollars this task's model calls cost; None when the model has no known price
    cost: float | None = None
    #: the budgets, their use and what stopped the run (None when no budget was set)
    budget: dict[str, Any] | None = None

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
            "result": self.result,
            "cost": self.cost,
            "budget": self.budget,
        }


class EventBase:
    """Base class of everything ``Agent.run`` yields; each event's ``kind`` names it.

    Front ends take the :data:`Event` union and ``match`` on the types, so a renamed
    event fails the type check instead of going silently unrendered.
    """

    kind: ClassVar[str]


@dataclass
class RunStarted(EventBase):
    kind: ClassVar[Literal["RunStarted"]] = "RunStarted"
    task: str
    model: str
    protocol: str
    notebook: Path | None
    sandbox: str
    #: the kernelspec name and the model endpoint's URL (traces name them)
    kernel: str = ""
    base_url: str = ""


@dataclass
class ModelDelta(EventBase):
    """A piece of the model's reply as it streams."""

    kind: ClassVar[Literal["ModelDelta"]] = "ModelDelta"
    text: str


@dataclass
class ModelRetracted(EventBase):
    """The reply streamed so far is void: a retry streams it again from the start."""

    kind: ClassVar[Literal["ModelRetracted"]] = "ModelRetracted"


@dataclass
class ModelCalled(EventBase):
    """One model call is done: its reply, tokens and timings (traces and budgets read it).

    ``first_token_s`` is the time to the first streamed piece (None if nothing streamed
    before the end); ``request`` holds the sampling options sent (temperature, ...).
    """

    kind: ClassVar[Literal["ModelCalled"]] = "ModelCalled"
    step: int
    model: str
    completion: Completion
    duration_s: float
    first_token_s: float | None = None
    request: dict[str, Any] = field(default_factory=dict)


@dataclass
class StateRebuilt(EventBase):
    """After a kernel restart, earlier cells were replayed to rebuild the state."""

    kind: ClassVar[Literal["StateRebuilt"]] = "StateRebuilt"
    replayed: int
    skipped: int
    duration_s: float


@dataclass
class ModelReply(EventBase):
    """The model's whole reply for one turn (prose, without the code it asked to run)."""

    kind: ClassVar[Literal["ModelReply"]] = "ModelReply"
    text: str
    step: int


@dataclass
class CellStarted(EventBase):
    kind: ClassVar[Literal["CellStarted"]] = "CellStarted"
    step: int
    code: str


@dataclass
class CellOutput(EventBase):
    """An output piece while a cell runs (a stream chunk, a display, an error)."""

    kind: ClassVar[Literal["CellOutput"]] = "CellOutput"
    step: int
    output: Any


@dataclass
class CellFinished(EventBase):
    kind: ClassVar[Literal["CellFinished"]] = "CellFinished"
    step: int
    result: CellResult


@dataclass
class CellSkipped(EventBase):
    kind: ClassVar[Literal["CellSkipped"]] = "CellSkipped"
    step: int
    code: str


@dataclass
class Notice(EventBase):
    """Something a user should see: a restart, a state rebuild, an unsandboxed kernel."""

    kind: ClassVar[Literal["Notice"]] = "Notice"
    text: str
    level: str = "info"  # "info" | "warning"


@dataclass
class Answer(EventBase):
    kind: ClassVar[Literal["Answer"]] = "Answer"
    text: str


@dataclass
class RunFinished(EventBase):
    kind: ClassVar[Literal["RunFinished"]] = "RunFinished"
    result: RunResult


#: everything ``Agent.run`` yields
Event: TypeAlias = (
    RunStarted
    | ModelDelta
    | ModelRetracted
    | ModelCalled
    | StateRebuilt
    | ModelReply
    | CellStarted
    | CellOutput
    | CellFinished
    | CellSkipped
    | Notice
    | Answer
    | RunFinished
)


class EventHandlers:
    """Calls the ``_on_<Kind>`` method for an event's type; a front end overrides the
    ones it shows. The ``match`` is on types, so a renamed event fails the type check."""

    def __call__(self, event: Event) -> None:
        match event:
            case RunStarted():
                self._on_RunStarted(event)
            case ModelDelta():
                self._on_ModelDelta(event)
            case ModelRetracted():
                self._on_ModelRetracted(event)
            case ModelCalled():
                self._on_ModelCalled(event)
            case StateRebuilt():
                self._on_StateRebuilt(event)
            case ModelReply():
                self._on_ModelReply(event)
            case CellStarted():
                self._on_CellStarted(event)
            case CellOutput():
                self._on_CellOutput(event)
            case CellFinished():
                self._on_CellFinished(event)
            case CellSkipped():
                self._on_CellSkipped(event)
            case Notice():
                self._on_Notice(event)
            case Answer():
                self._on_Answer(event)
            case RunFinished():
                self._on_RunFinished(event)

    def _on_RunStarted(self, event: RunStarted) -> None:
        pass

    def _on_ModelDelta(self, event: ModelDelta) -> None:
        pass

    def _on_ModelRetracted(self, event: ModelRetracted) -> None:
        pass

    def _on_ModelCalled(self, event: ModelCalled) -> None:
        pass

    def _on_StateRebuilt(self, event: StateRebuilt) -> None:
        pass

    def _on_ModelReply(self, event: ModelReply) -> None:
        pass

    def _on_CellStarted(self, event: CellStarted) -> None:
        pass

    def _on_CellOutput(self, event: CellOutput) -> None:
        pass

    def _on_CellFinished(self, event: CellFinished) -> None:
        pass

    def _on_CellSkipped(self, event: CellSkipped) -> None:
        pass

    def _on_Notice(self, event: Notice) -> None:
        pass

    def _on_Answer(self, event: Answer) -> None:
        pass

    def _on_RunFinished(self, event: RunFinished) -> None:
        pass
