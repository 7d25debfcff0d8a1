"""The small-model levers, one a module, and the registry that makes ``Settings.levers`` picks.

The hooks, the ask budget and the per-task memory are :mod:`.base`'s. Each lever is named
once, by its class's ``name``; :data:`SMALL_MODEL_LEVERS` lists them in the order the loop
consults them, and :data:`LEVERS` is their names.

``Settings.levers`` picks them: ``"auto"`` (all), ``"none"``, a tuple of names, or of
``-name`` (all but those), so ``bench/eval_analysis.py`` can measure each one. None of them
touches a kernel or a server, but ``data_preview``, which asks the kernel silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...errors import ConfigError
from .auto_import import AutoImport
from .base import Lever
from .data_preview import DataPreview
from .fenced_rules import FencedRules
from .grounding_check import GroundingCheck
from .no_install import NoInstall
from .nudge_no_code import NudgeNoCode
from .pandas_pitfalls import PandasPitfalls
from .preflight import Preflight
from .printed_answer import PrintedAnswer
from .prompt_echo import PromptEcho
from .prose_cell import ProseCell
from .push_after_error import PushAfterError
from .repeat_guard import RepeatGuard
from .result_check import ResultCheck
from .stall_guard import StallGuard
from .states_result import StatesResult
from .unbacked_answer import UnbackedAnswer

if TYPE_CHECKING:
    from ...settings import Settings

__all__ = ["LEVERS", "SMALL_MODEL_LEVERS", "levers_for"]

#: Every small-model lever, in the order the loop consults them. The position is semantic:
#: - ``on_answer`` and ``before_cell`` are first-wins: the first lever that asks (or stops)
#:   decides, and the ones after it are not consulted (nor spend their budget). So the
#:   cheap, certain checks come first (no cell ran; the last cell failed), the echo of our
#:   own words before the checks that would read it as an answer, ``unbacked_answer`` after
#:   ``push_after_error`` (it reads ``TaskState.error_pushed``), and ``stall_guard`` after
#:   the levers that refuse a cell and count a stall (``no_install``, ``prose_cell``);
#: - ``rewrite`` chains: ``preflight`` corrects the cell, then ``auto_import`` adds the
#:   imports the corrected cell needs;
#: - ``task_note`` and ``after_cell`` consult every lever, and their notes are sent in this
#:   order (the data preview first; a cell's record names every lever that acted on it).
SMALL_MODEL_LEVERS: tuple[type[Lever], ...] = (
    DataPreview,
    NudgeNoCode,
    PushAfterError,
    PromptEcho,
    GroundingCheck,
    UnbackedAnswer,
    StatesResult,
    PrintedAnswer,
    Preflight,
    AutoImport,
    PandasPitfalls,
    RepeatGuard,
    NoInstall,
    ProseCell,
    StallGuard,
    FencedRules,
)

LEVERS: tuple[str, ...] = tuple(lever.name for lever in SMALL_MODEL_LEVERS)
"""Every small-model lever's name, in the order the loop consults them."""


def levers_for(settings: Settings, result_missing: Callable[[], bool] | None = None) -> list[Lever]:
    """The levers ``settings.levers`` asks for: ``"auto"`` (all), ``"none"``, a tuple of
    names, or of ``-name`` (all but those); then ``result_check`` (not a small-model lever)
    when ``settings.ask_result`` and ``result_missing`` tells whether a result is missing."""
    chosen: Sequence[str]
    if settings.levers == "auto":
        chosen = LEVERS
    elif settings.levers == "none":
        chosen = ()
    elif all(name.startswith("-") for name in settings.levers):  # all but these
        chosen = [n for n in LEVERS if f"-{n}" not in settings.levers]
        unknown = sorted({n[1:] for n in settings.levers} - set(LEVERS))
        if unknown:
            raise ConfigError(f"unknown lever {unknown[0]!r}; the levers are: {', '.join(LEVERS)}")
    else:
        chosen = settings.levers
    unknown = sorted(set(chosen) - set(LEVERS))
    if unknown:
        raise ConfigError(f"unknown lever {unknown[0]!r}; the levers are: {', '.join(LEVERS)}")
    levers = [lever.from_settings(settings) for lever in SMALL_MODEL_LEVERS if lever.name in chosen]
    if settings.ask_result and result_missing is not None:
        levers.append(ResultCheck(result_missing))
    return levers
