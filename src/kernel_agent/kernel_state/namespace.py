"""A compact summary of the kernel namespace, and what changed between cells.

The summary is computed inside the kernel by one ``user_expression`` evaluated
with the cell itself (no extra round trip). Python kernels only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .expressions import expression_json

if TYPE_CHECKING:
    from ..executors.base import AsyncExecutor

__all__ = [
    "NAMESPACE_EXPRESSION",
    "VariableInfo",
    "describe",
    "diff_namespaces",
    "namespace_probe",
    "parse_summary",
    "probe_namespace",
]

_SUMMARY_SOURCE = r"""
_cells = [COUNTED_CELLS]

def _counting(cells):
    # the non-missing counts read every value: a budget of cells for the whole summary
    if cells > _cells[0]:
        return False
    _cells[0] -= cells
    return True

def _describe(v):
    kind = type(v).__name__
    shape = getattr(v, "shape", None)
    info = {"type": kind, "id": id(v)}
    try:
        if shape is not None and not callable(shape):
            info["shape"] = str(tuple(shape))
        elif hasattr(v, "__len__") and not isinstance(v, type):
            info["len"] = len(v)
    except Exception:
        pass
    columns = getattr(v, "columns", None)
    if columns is not None and not callable(columns):
        try:
            info["columns"] = [str(c)[:80] for c in list(columns)[:20]]
        except Exception:
            pass
        try:
            if _counting(len(v) * min(len(columns), 20)):
                info["counts"] = [int(n) for n in v.iloc[:, :20].count()]
        except Exception:
            pass
    index = getattr(v, "index", None)
    if kind == "Series":
        info["dtype"] = str(getattr(v, "dtype", ""))[:40]
        try:
            if _counting(len(v)):
                info["counts"] = [int(v.count())]
        except Exception:
            pass
    if columns is not None or kind == "Series":
        try:
            if (
                index.name is None
                and index.nlevels == 1
                and str(index.dtype).startswith(("int", "uint"))
            ):
                info["row_numbers"] = True
        except Exception:
            pass
    if isinstance(v, (int, float, bool, complex)) or (isinstance(v, str) and len(v) <= 60):
        info["value"] = repr(v)[:60]
    return info

skip = {"In", "Out", "exit", "quit", "get_ipython", "open"}
out = {}
for k, v in list(ns.items()):
    if k.startswith("_") or k in skip:
        continue
    if type(v).__name__ in ("module", "function", "builtin_function_or_method", "type"):
        continue
    try:
        out[k] = _describe(v)
    except Exception:
        pass
    if len(out) >= 200:
        break
result = __import__("json").dumps(out)
"""

#: the values one summary reads for its non-missing counts, over all variables (2M cells
#: take about 45 ms here; a 5M-row frame of 20 columns alone took 103 ms, on every cell)
COUNTED_CELLS = 2_000_000
_SUMMARY_SOURCE = _SUMMARY_SOURCE.replace("COUNTED_CELLS", str(COUNTED_CELLS))

#: Evaluate with the cell (``user_expressions={"ns": NAMESPACE_EXPRESSION}``).
NAMESPACE_EXPRESSION = (
    "(lambda g: (exec(" + repr(_SUMMARY_SOURCE) + ", g), g['result'])[1])"
    "({'ns': get_ipython().user_ns})"
)


def namespace_probe(language_info: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``user_expressions`` that make a kernel report its variables with a cell's
    reply; None for a kernel that is not Python."""
    return {"ns": NAMESPACE_EXPRESSION} if language_info.get("name") == "python" else None


async def probe_namespace(executor: AsyncExecutor) -> dict[str, Any]:
    """The kernel's answer to the probe now, as a reply's ``user_expressions``.

    An empty cell carries it, so no execution count is used. A kernel skips user
    expressions after a cell that failed: this asks again. ``{}`` when not Python.
    """
    expressions = namespace_probe(executor.language_info)
    if expressions is None:
        return {}
    probe = await executor.execute("", timeout=30, user_expressions=expressions)
    return probe.user_expressions


@dataclass(frozen=True)
class VariableInfo:
    name: str
    type: str
    id: int = 0
    shape: str | None = None
    len: int | None = None
    value: str | None = None
    columns: tuple[str, ...] | None = None
    #: a frame or series whose index is unnamed integers (row numbers, as ``read_csv`` makes)
    row_numbers: bool = False
    #: a series' dtype (``bool`` for a mask)
    dtype: str | None = None
    #: values that are not missing: a frame's, per column listed; a series', one (None
    #: past the summary's :data:`COUNTED_CELLS`)
    counts: tuple[int, ...] | None = None

    def fingerprint(self) -> tuple[Any, ...]:
        return (self.type, self.id, self.shape, self.len, self.value, self.columns)

    def short(self) -> str:
        extra = ""
        if self.shape:
            extra = f", shape {self.shape}"
        elif self.len is not None:
            extra = f", len {self.len}"
        if self.columns:
            extra += f", columns {', '.join(self.columns)}"
        if self.value is not None:
            extra += f" = {self.value}"
        line = f"{self.name} ({self.type}{extra})"
        return line if len(line) <= MAX_SHORT_CHARS else line[: MAX_SHORT_CHARS - 5] + " ...)"


def parse_summary(user_expression_result: dict[str, Any] | None) -> dict[str, VariableInfo] | None:
    """Turn the kernel's answer to :data:`NAMESPACE_EXPRESSION` into VariableInfo objects.

    The answer is the kernel's (it can forge it): None for one of the wrong shape or
    size; a variable whose entry has the wrong shape, or whose name is longer than
    :data:`MAX_NAME_CHARS`, is left out. Each variable's line for the model
    (:meth:`VariableInfo.short`) is at most :data:`MAX_SHORT_CHARS`, and the summary
    stops at :data:`MAX_SUMMARY_CHARS` of them in all, whatever the kernel reports.
    """
    if not isinstance(user_expression_result, dict) or user_expression_result.get("status") != "ok":
        return None
    raw = expression_json(user_expression_result)
    if not isinstance(raw, dict):
        return None
    out: dict[str, VariableInfo] = {}
    total = 0
    for name, info in list(raw.items())[:_MAX_VARIABLES]:
        variable = _variable(name, info) if len(name) <= MAX_NAME_CHARS else None
        if variable is not None:
            total += len(variable.short()) + 2
            if total > MAX_SUMMARY_CHARS:
                break
            out[name] = variable
    return out


_MAX_VARIABLES = 200
#: a variable whose name is longer is left out of the summary (a name is never cut: the
#: model would use a name that does not exist)
MAX_NAME_CHARS = 64
#: one variable's line for the model (its shape, value and columns are cut to fit)
MAX_SHORT_CHARS = 400
#: all the variables' lines of one summary
MAX_SUMMARY_CHARS = 16_000
#: the "Variables new: ..." note under a cell
MAX_NOTE_CHARS = 1_500


def _short(value: Any, limit: int = 80) -> str | None:
    return None if value is None else str(value)[:limit]


def _variable(name: str, info: Any) -> VariableInfo | None:
    """One variable of the summary; None if its entry has the wrong shape."""
    if not isinstance(info, dict) or not name.isidentifier():
        return None
    try:
        length, ident = info.get("len"), int(info.get("id", 0))
        columns = info.get("columns")
        return VariableInfo(
            name=name,
            type=str(info.get("type", "?"))[:80],
            id=ident,
            shape=_short(info.get("shape")),
            len=length if isinstance(length, int) and not isinstance(length, bool) else None,
            value=_short(info.get("value")),
            columns=(
                tuple(str(c)[:80] for c in columns[:20])
                if isinstance(columns, list) and columns
                else None
            ),
            row_numbers=info.get("row_numbers") is True,
            dtype=_short(info.get("dtype"), 40),
            counts=_counts(info.get("counts")),
        )
    except (TypeError, ValueError, OverflowError):
        return None


def _counts(counts: Any) -> tuple[int, ...] | None:
    """The kernel's non-missing counts, when they are at most 20 whole numbers."""
    if not isinstance(counts, list) or not counts or len(counts) > 20:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return None
    return tuple(counts)


def diff_namespaces(
    before: dict[str, VariableInfo], after: dict[str, VariableInfo]
) -> tuple[list[VariableInfo], list[VariableInfo], list[str]]:
    """(new, changed, removed) between two summaries."""
    new = [v for k, v in after.items() if k not in before]
    changed = [
        v for k, v in after.items() if k in before and before[k].fingerprint() != v.fingerprint()
    ]
    removed = [k for k in before if k not in after]
    return new, changed, removed


def describe(
    before: dict[str, VariableInfo], after: dict[str, VariableInfo], limit: int = 12
) -> str:
    """One or two lines for the model: what the cell defined or changed, in at most
    :data:`MAX_NOTE_CHARS` characters (then "and N more")."""
    new, changed, removed = diff_namespaces(before, after)
    parts = []
    room = MAX_NOTE_CHARS
    for label, items in (("new", new), ("changed", changed), ("removed", removed)):
        if not items:
            continue
        shown: list[str] = []
        for item in items[:limit]:
            text = item if isinstance(item, str) else item.short()
            if len(text) + 2 > room:
                break
            shown.append(text)
            room -= len(text) + 2
        more = f" and {len(items) - len(shown)} more" if len(items) > len(shown) else ""
        parts.append(f"{label}: {', '.join(shown)}{more}")
    return "; ".join(parts)
