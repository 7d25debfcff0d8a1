"""The names kernel-agent writes into a notebook's metadata, spelled once.

Each cell's record is under ``cell.metadata[NAMESPACE]``; the run's under
``nb.metadata[NAMESPACE]``. One writer puts cells' records there,
:class:`kernel_agent.kernel_state.KernelState`; the readers (:mod:`.clean`,
:mod:`.export`, :mod:`kernel_agent.observe.runs`, the session's text view) use these
names, so a renamed key is an import error, not a silently empty column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = [
    "NAMESPACE",
    "STATUS",
    "RESTARTED",
    "REPLAY",
    "ROLE",
    "STEP",
    "LEVER",
    "EXEC_S",
    "GEN_S",
    "TOKENS",
    "STARTED",
    "ENDED",
    "RUNNING",
    "SKIPPED",
    "INTERRUPTED",
    "RESTART",
    "ROLE_TASK",
    "ROLE_ANSWER",
    "ROLE_NOTE",
    "ROLE_BRIEFING",
    "ROLE_PROSE",
    "ROLE_PROVENANCE",
    "cell_meta",
    "run_meta",
    "run_meta_for_writing",
]

#: the key under which kernel-agent's records live (cell and notebook metadata)
NAMESPACE = "kernel_agent"

# ---- keys of a cell's record
#: a code cell's status: the CellResult's (ok, error, timeout, died, ...) or one below
STATUS = "status"
#: true on the cell after which the kernel was restarted (its state, and earlier, is gone)
RESTARTED = "restarted"
#: true on a cell replayed to rebuild the state after a restart
REPLAY = "replay"
#: what a markdown cell is (one of the ROLE_* values)
ROLE = "role"
#: the agent's step number of a code cell
STEP = "step"
#: the lever that skipped a cell or asked again, rewrote a cell or noted its output
LEVER = "lever"
#: the kernel's / the model's seconds for the cell
EXEC_S = "exec_s"
GEN_S = "gen_s"
#: the reply's token counts (the first cell of a reply)
TOKENS = "tokens"
#: when the cell started and ended in the kernel (ISO 8601, ms)
STARTED = "started"
ENDED = "ended"

# ---- statuses kernel-agent writes beside the CellResult's own
#: recorded before it runs (a run that ends mid-cell still shows the code)
RUNNING = "running"
#: not run (the user or a lever skipped it)
SKIPPED = "skipped"
#: the run ended while the cell ran
INTERRUPTED = "interrupted"
#: the marker cell of a restart asked for by a front end
RESTART = "restart"

# ---- roles of markdown cells
ROLE_TASK = "task"
ROLE_ANSWER = "answer"
#: kernel-agent's notes (a rebuild, a reply sent back); left out of the clean notebook
ROLE_NOTE = "note"
#: the data preview before the first reply; left out of the clean notebook
ROLE_BRIEFING = "briefing"
#: the model's prose before a cell (the default for markdown without a role)
ROLE_PROSE = "prose"
#: the header an export adds
ROLE_PROVENANCE = "provenance"


def cell_meta(cell: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's record, or ``{}`` when it has none or one of the wrong shape."""
    metadata = cell.get("metadata")
    meta = metadata.get(NAMESPACE) if isinstance(metadata, Mapping) else None
    return dict(meta) if isinstance(meta, Mapping) else {}


# ---- the run's record: one validating reader for every consumer (export, verify, observe)
def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | int | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if ok and value == value and abs(value) != float("inf") else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(value: Any) -> dict[str, Any] | None:
    """Token counts that are ints, ``source`` a str, ``reported`` a bool."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {
        k: value[k]
        for k in ("prompt_tokens", "completion_tokens", "total_tokens")
        if _count(value.get(k)) is not None
    }
    if isinstance(value.get("source"), str):
        out["source"] = value["source"]
    if isinstance(value.get("reported"), bool):
        out["reported"] = value["reported"]
    return out


def _numbers(value: Any) -> dict[str, float | int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if _number(v) is not None}


def _budget(value: Any) -> dict[str, Any] | None:
    """``limits`` and ``used`` dicts of numbers, ``stopped_by`` a str."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {
        "limits": _numbers(value.get("limits")),
        "used": _numbers(value.get("used")),
    }
    if isinstance(value.get("stopped_by"), str):
        out["stopped_by"] = value["stopped_by"]
    return out


def _verify(value: Any) -> dict[str, Any] | None:
    """A verify verdict with each field of its type (a wrong one is left out)."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {}
    for key in ("verdict", "checked", "kernel", "error"):
        if isinstance(value.get(key), str):
            out[key] = value[key]
    for key in ("code_cells", "reproduced_cells"):
        if _count(value.get(key)) is not None:
            out[key] = value[key]
    first = value.get("first_difference")
    if isinstance(first, Mapping):
        problems = first.get("problems")
        out["first_difference"] = {
            "code_cell": _count(first.get("code_cell")),
            "problems": [p for p in problems if isinstance(p, str)]
            if isinstance(problems, list)
            else [],
        }
    if _number(value.get("seconds")) is not None:
        out["seconds"] = value["seconds"]
    if isinstance(value.get("image_tolerance"), Mapping):
        out["image_tolerance"] = _numbers(value["image_tolerance"])
    return out


def _flat(value: Any) -> dict[str, Any] | None:
    """A mapping of names to scalars (the sandbox's description)."""
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items() if isinstance(v, (str, int, float, bool))}


_RUN_FIELDS: dict[str, Callable[[Any], Any]] = {
    "task": _text,
    "model": _text,
    "status": _text,
    "started": _text,
    "ended": _text,
    "transcript": _text,
    "clean_notebook": _text,
    "cost": _number,
    "model_time_s": _number,
    "kernel_time_s": _number,
    "duration_s": _number,
    "usage": _usage,
    "budget": _budget,
    "verify": _verify,
    "sandbox": _flat,
    "host_helpers": lambda v: v if isinstance(v, bool) else None,
    # checked where it is used, with its own one-line error (tools.requirements.parse_pins)
    "installs": lambda v: v,
}


def run_meta(metadata: Any) -> dict[str, Any]:
    """The run's record in a notebook's ``metadata``, every known field of its type.

    A record that is not a mapping (``"x"``, ``[1]``, ``["ab"]``: a stranger's notebook)
    reads as none: ``{}``. A known field of the wrong type is left out, as if absent;
    unknown fields are left out too. ``installs`` is passed on as stored: its reader
    refuses a bad one with a one-line error. Every reader of ``metadata.kernel_agent``
    goes through here.
    """
    record = metadata.get(NAMESPACE) if isinstance(metadata, Mapping) else None
    if not isinstance(record, Mapping):
        return {}
    out = {}
    for key, check in _RUN_FIELDS.items():
        if key in record:
            value = check(record[key])
            if value is not None:
                out[key] = value
    return out


def run_meta_for_writing(metadata: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The run's record in ``metadata`` to add to: a record that is not a mapping is
    replaced by an empty one (it could not be read anyway)."""
    if not isinstance(metadata.get(NAMESPACE), MutableMapping):
        metadata[NAMESPACE] = {}
    record = metadata[NAMESPACE]  # as stored: a NotebookNode copies what it is given
    assert isinstance(record, MutableMapping)
    return record
