"""Events carry a literal kind, and the front ends dispatch on their types."""

from __future__ import annotations

import typing

from rich.console import Console

from kernel_agent import events
from kernel_agent.frontends.render import EventRenderer


def test_every_event_of_the_union_names_itself() -> None:
    members = typing.get_args(events.Event)
    assert len(members) == len({m.__name__ for m in members}) >= 13
    for cls in members:
        assert issubclass(cls, events.EventBase)
        assert cls.kind == cls.__name__
    subclasses = {c for c in vars(events).values() if isinstance(c, type)}
    subclasses = {
        c for c in subclasses if issubclass(c, events.EventBase) and c is not events.EventBase
    }
    assert subclasses == set(members), "an event outside the union would go unrendered"


def test_the_terminal_renderer_dispatches_on_the_type() -> None:
    console = Console(record=True, width=100, force_terminal=False)
    render = EventRenderer(console)
    render(events.Notice("kernel restarted", "warning"))
    render(events.CellSkipped(step=2, code="import os"))
    render(events.Answer("the mean is 4.2"))  # printed by print_result, not here
    text = console.export_text()
    assert "kernel restarted" in text and "skipped" in text.lower()
