"""Budgets: what one task's run may spend in tokens, wall time and money. Pure, no I/O.

The loop asks :meth:`Budget.check` before every model call and records each call with
:meth:`Budget.record`. A call is refused when a budget is spent, or when the next call
would cross it judging by the last one: the next prompt holds the last prompt and its
reply, so it costs at least the last call's tokens (and money), and a reply takes about
as long as the last one did. The run then ends with status ``"budget"``, unless the user
extends it (``--interactive``/``--approve``), which adds the original limit once more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..llm.stream import Usage
from ..llm.view import render_cell
from ..results import CellResult
from ..settings import Price, Settings
from ..syncify import call_in_consumer

__all__ = ["Budget", "BudgetStop", "found_so_far", "stopped_answer"]

#: budget name -> (the flag that sets it, its unit)
_BUDGETS = {
    "max_total_tokens": ("--max-total-tokens", "tokens"),
    "max_wall_time": ("--max-wall-time", "s"),
    "max_cost": ("--max-cost", "$"),
}


def _amount(value: float, unit: str) -> str:
    if unit == "$":
        return f"${value:.4f}"
    if unit == "s":
        return f"{value:.1f} s"
    return f"{int(value):,} tokens"


@dataclass(frozen=True)
class BudgetStop:
    """A budget the next model call would cross."""

    name: str  # "max_total_tokens" | "max_wall_time" | "max_cost"
    limit: float
    used: float
    next_call: float  # what the next call is expected to add

    @property
    def flag(self) -> str:
        return _BUDGETS[self.name][0]

    def text(self) -> str:
        unit = _BUDGETS[self.name][1]
        spent = "is spent" if self.used >= self.limit else "would be crossed by the next model call"
        return (
            f"the budget {self.flag} {_amount(self.limit, unit)} {spent} "
            f"(used {_amount(self.used, unit)}"
            + (f", the next call about {_amount(self.next_call, unit)})" if self.next_call else ")")
        )


class Budget:
    """One task's budgets and what it has used so far."""

    def __init__(self, settings: Settings, model: str, *, local: bool = False) -> None:
        self.limits: dict[str, float] = {
            name: float(getattr(settings, name))
            for name in _BUDGETS
            if getattr(settings, name) is not None
        }
        self._original = dict(self.limits)
        #: (input, output) dollars per million tokens; None when the model is not priced
        self.price: Price | None = (0.0, 0.0) if local else settings.price(model)
        if "max_cost" in self.limits and self.price is None:
            raise ConfigError(
                f"--max-cost needs the price of {model!r}: pass --price {model}=IN/OUT "
                "(dollars per million input/output tokens)"
            )
        self.started = time.monotonic()
        self.tokens = 0
        self.cost = 0.0
        self.calls = 0
        self.extended = 0
        self.stopped_by: str | None = None
        self._last: tuple[int, float, float] = (0, 0.0, 0.0)  # tokens, cost, seconds

    @property
    def wall_time(self) -> float:
        return time.monotonic() - self.started

    def record(self, usage: Usage | None, seconds: float) -> None:
        """One model call: its tokens (None: unknown, counted as none) and its duration."""
        tokens = usage.total_tokens if usage is not None else 0
        cost = 0.0
        if usage is not None and self.price is not None:
            given, taken = self.price
            cost = (usage.prompt_tokens * given + usage.completion_tokens * taken) / 1e6
        self.calls += 1
        self.tokens += tokens
        self.cost += cost
        self._last = (tokens, cost, seconds)

    def check(self) -> BudgetStop | None:
        """The first budget the next model call would cross, or None to go on."""
        last_tokens, last_cost, last_s = self._last
        use = {
            "max_total_tokens": (self.tokens, last_tokens),
            "max_wall_time": (self.wall_time, last_s),
            "max_cost": (self.cost, last_cost),
        }
        for name, limit in self.limits.items():
            used, next_call = use[name]
            if used >= limit or used + next_call > limit:
                return BudgetStop(name, limit, used, next_call)
        return None

    def extend(self, stop: BudgetStop) -> None:
        """Raise the budget that stopped the run by its original amount."""
        self.limits[stop.name] += self._original[stop.name]
        self.extended += 1

    def as_metadata(self) -> dict[str, Any]:
        """What the notebook records: the limits, the use, and what stopped the run."""
        meta: dict[str, Any] = {
            "limits": dict(self.limits),
            "used": {
                "total_tokens": self.tokens,
                "wall_time_s": round(self.wall_time, 3),
                "model_calls": self.calls,
            },
        }
        if self.price is not None:
            meta["used"]["cost"] = round(self.cost, 6)
            meta["price_per_million"] = list(self.price)
        if self.extended:
            meta["extended"] = self.extended
        if self.stopped_by:
            meta["stopped_by"] = self.stopped_by
        return meta


def stopped_answer(stop: BudgetStop, cells: list[CellResult]) -> str:
    """The answer of a run a budget stopped: which budget, and what the cells had found."""
    return found_so_far(f"Stopped before the next model call: {stop.text()}.", cells)


def found_so_far(text: str, cells: list[CellResult]) -> str:
    """``text``, then what the last cell with output showed (a stopped run loses nothing)."""
    found = [c for c in cells if c.ok and c.outputs]
    if not found:
        ran = f"{len(cells)} cell(s) ran" if cells else "no cell ran"
        return f"{text} Nothing was found yet ({ran})."
    shown = render_cell(found[-1], budget=800).text.strip()
    return (
        f"{text} So far {len(cells)} cell(s) ran; the last one with output showed:\n\n"
        f"```\n{shown}\n```"
    )


async def stop_or_extend(
    budget: Budget | None, extend: Callable[[BudgetStop], bool] | None
) -> BudgetStop | None:
    """The budget that stops the run before the next model call, unless ``extend`` (asked
    in the consumer's thread) raises it."""
    while budget is not None and (stop := budget.check()) is not None:
        if extend is None or not await call_in_consumer(extend, stop):
            budget.stopped_by = stop.name
            return stop
        budget.extend(stop)
    return None
