"""Cheap questions to ask a Python kernel before a task: what it can import, what data it has.

Small models waste whole runs on a library that is not there (``!pip install`` in a
sandbox without network) or on guessing a column's name. Both are answered once, up
front, by the kernel itself, so the answer holds for the kernel the code will run in
(its venv, its sandbox), not for the agent's process:

- :data:`LIBRARY_PROBE_CODE` is a ``user_expression``: it asks ``importlib.util.find_spec``
  and ``importlib.metadata`` and imports none of the libraries (importing pandas,
  sklearn and statsmodels costs seconds and memory). :func:`parse_library_probe` reads
  the answer and :func:`describe_libraries` makes one line of it for a system prompt.
- :func:`data_preview_code` is a cell that prints a compact preview of the data files in
  the kernel's cwd (shape, columns with dtypes, a few rows, missing values), read by
  pandas in the kernel, within a character budget.

Nothing here talks to a kernel; the caller runs the code and passes the results in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .expressions import expression_json, expression_string

__all__ = [
    "DATA_STACK",
    "OTHER_LIBRARIES",
    "LIBRARIES",
    "LIBRARY_PROBE_CODE",
    "library_probe_expression",
    "parse_library_probe",
    "describe_libraries",
    "data_preview_code",
    "data_preview_expression",
    "parse_text_expression",
]

#: import name -> distribution name: the core dependencies of kernel-agent, in this order
DATA_STACK: dict[str, str] = {
    "pandas": "pandas",
    "numpy": "numpy",
    "scipy": "scipy",
    "sklearn": "scikit-learn",
    "statsmodels": "statsmodels",
    "matplotlib": "matplotlib",
    "seaborn": "seaborn",
    "pyarrow": "pyarrow",
    "openpyxl": "openpyxl",
}

#: other libraries a model is likely to reach for
OTHER_LIBRARIES: dict[str, str] = {
    "sympy": "sympy",
    "polars": "polars",
    "plotly": "plotly",
    "xgboost": "xgboost",
    "lightgbm": "lightgbm",
    "networkx": "networkx",
    "requests": "requests",
    "bs4": "beautifulsoup4",
    "PIL": "pillow",
    "xlrd": "xlrd",
    "duckdb": "duckdb",
    "torch": "torch",
}

LIBRARIES: dict[str, str] = {**DATA_STACK, **OTHER_LIBRARIES}

#: the longest probe answer read (the kernel's; a preview is ~3,000 characters)
_MAX_PROBE_CHARS = 65_536
_MAX_LINE_CHARS = 2_000


def library_probe_expression(libraries: Mapping[str, str] = LIBRARIES) -> str:
    """A ``user_expression`` whose value is JSON ``{import name: version}`` of what is importable.

    The version is ``""`` when a module is found but no distribution metadata is (a
    loose module on ``sys.path``). One expression, no names left in the namespace.
    """
    pairs = repr(sorted(libraries.items()))
    return (
        "__import__('json').dumps({m: next((x.version for x in "
        "__import__('importlib.metadata').metadata.distributions(name=d)), '') "
        f"for m, d in {pairs} "
        "if __import__('importlib.util').util.find_spec(m) is not None})"
    )


#: Evaluate with any cell: ``user_expressions={"libraries": LIBRARY_PROBE_CODE}``.
LIBRARY_PROBE_CODE = library_probe_expression()


def parse_library_probe(mime_bundle: Mapping[str, Any] | None) -> dict[str, str]:
    """The kernel's answer to the probe as ``{import name: version}``; ``{}`` if it failed."""
    raw = expression_json(mime_bundle, _MAX_PROBE_CHARS)
    if not isinstance(raw, dict):
        return {}
    return {str(name)[:80]: str(version or "")[:40] for name, version in list(raw.items())[:100]}


def describe_libraries(found: Mapping[str, str], libraries: Mapping[str, str] = LIBRARIES) -> str:
    """One line for a system prompt: what the kernel can import (with versions), what not."""
    have = [f"{name} {found[name]}".rstrip() for name in libraries if name in found]
    have += [f"{name} {ver}".rstrip() for name, ver in found.items() if name not in libraries]
    missing = [name for name in libraries if name not in found]
    line = "Importable in the kernel: " + (", ".join(have) or "none of the usual libraries")
    if missing:
        line += "; not installed: " + ", ".join(missing)
    # the kernel's answer: at most 100 names, and this line for the model bounded again
    return (line if len(line) <= _MAX_LINE_CHARS else line[: _MAX_LINE_CHARS - 4] + " ...") + "."


_PREVIEW_SOURCE = r'''
import os

def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024

def _reader(name):
    low = name.lower()
    for ext, kind in ((".csv", "csv"), (".tsv", "tsv"), (".tab", "tsv"), (".xlsx", "excel"),
                      (".xlsm", "excel"), (".xls", "excel"), (".parquet", "parquet"),
                      (".pq", "parquet"), (".jsonl", "jsonl"), (".ndjson", "jsonl"),
                      (".json", "json")):
        if low.endswith(ext):
            return kind
    return None

def _sep(path):
    import csv
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        sample = fh.read(65536)
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","

def _frames(pd, path, kind, size):
    """[(label, DataFrame, note)] for one file."""
    big = size > MAX_READ
    if kind in ("csv", "tsv"):
        sep = "\t" if kind == "tsv" else _sep(path)
        df = pd.read_csv(path, sep=sep, low_memory=False, encoding_errors="replace",
                         nrows=PARTIAL_ROWS if big else None)
        note = f"first {PARTIAL_ROWS} rows read of a large file" if big else ""
        if sep not in (",", "\t"):
            note = (note + "; " if note else "") + f"separator {sep!r}"
        return [("", df, note)]
    if big:
        raise ValueError(f"too large to preview ({_size(size)})")
    if kind == "excel":
        sheets = pd.read_excel(path, sheet_name=None)
        many = len(sheets) > 1
        return [(f"sheet {k!r}" if many else "", v, "") for k, v in list(sheets.items())[:5]]
    if kind == "parquet":
        return [("", pd.read_parquet(path), "")]
    if kind == "jsonl":
        return [("", pd.read_json(path, lines=True), "")]
    try:
        return [("", pd.read_json(path), "")]
    except ValueError:
        return [("", pd.read_json(path, lines=True), "")]

def _table(df, label, note):
    rows, cols = df.shape
    head = f"  {label + ': ' if label else ''}{rows} rows x {cols} columns"
    lines = [head + (f" ({note})" if note else "")]
    shown = _listed(df)
    more = f", ... {cols - len(shown)} more" if cols > len(shown) else ""
    lines.append("  columns: " + ", ".join(f"{str(c)!r} {df[c].dtype}" for c in shown) + more)
    missing = df.isna().sum()
    missing = missing[missing > 0]
    if len(missing):
        parts = [f"{str(c)!r} {int(n)}" for c, n in missing.items()][:MAX_COLS]
        lines.append("  missing values: " + ", ".join(parts))
    else:
        lines.append("  missing values: none")
    few = _few_values(df, shown)
    if few:
        lines.append("  few distinct values: " + few)
    if rows:
        named = _named(df.columns) if cols > FOCUS_OVER else []
        rows_of = df[named] if named else df
        if named:
            lines.append("  first rows of the columns the task names:")
        text = rows_of.head(ROWS).to_string(max_cols=MAX_COLS, max_colwidth=24, line_width=WIDTH)
        lines += ["  " + line for line in text.splitlines()]
    return lines

def _is_label(series):
    """A column that names things or counts few cases: text, bool, category or integers."""
    kind = series.dtype.kind
    return kind in "biuO" or str(series.dtype) in ("category", "str", "string")

def _listed(df):
    """The first MAX_COLS columns, then up to EXTRA_COLS later ones the task names or that
    hold a few labels (a wide table's class column is often its last)."""
    first = list(df.columns[:MAX_COLS])
    named = set(_named(df.columns))
    later = []
    for c in df.columns[MAX_COLS:]:
        if len(later) == EXTRA_COLS:
            break
        try:
            label = _is_label(df[c]) and df[c].nunique() <= 20
        except Exception:
            label = False
        if c in named or label:
            later.append(c)
    return first + later

def _few_values(df, columns):
    """The values of text columns with at most FEW of them, e.g. "'Sex' 'female', 'male'"
    (what a filter must match exactly; integer codes are left out: a small model counts
    them for "how many quarters")."""
    if len(df) < 2 * FEW:
        return ""
    parts = []
    for c in columns:
        series = df[c]
        if not (_is_label(series) and series.dtype.kind not in "iu"):
            continue
        try:
            values = series.dropna().unique()
            if not 1 < len(values) <= FEW:
                continue
            plain = [v.item() if hasattr(v, "item") else v for v in values]
            try:
                plain.sort()
            except TypeError:
                plain.sort(key=repr)
            texts = [repr(v) for v in plain]
        except Exception:
            continue
        if max(len(t) for t in texts) > 24:
            continue
        parts.append(f"{str(c)!r} " + ", ".join(texts))
    text = "; ".join(parts)
    return text if len(text) <= 400 else text[:396].rsplit("; ", 1)[0] + "; ..."

def _named(columns):
    """The columns the task names (as whole words), to show rows of a wide table."""
    import re
    if not FOCUS:
        return []
    return [c for c in columns if len(str(c)) > 1 and re.search(
        r"(?<![\w])" + re.escape(str(c).lower()) + r"(?![\w])", FOCUS)][:MAX_COLS]

def _main():
    names = NAMES if NAMES is not None else sorted(  # data files first, then the rest
        (n for n in os.listdir(".") if not n.startswith(".")),
        key=lambda n: (_reader(n) is None, n),
    )
    try:
        import pandas as pd
    except ImportError:
        pd = None
    blocks = []
    for name in names:
        try:
            st = os.stat(name)
        except OSError as exc:
            blocks.append([f"{name}: cannot read ({type(exc).__name__})"])
            continue
        if os.path.isdir(name):
            blocks.append([f"{name}/ (directory)"])
            continue
        lines = [f"{name} ({_size(st.st_size)})"]
        kind = _reader(name)
        if kind and pd is not None:
            try:
                for label, df, note in _frames(pd, name, kind, st.st_size):
                    lines += _table(df, label, note)
            except Exception as exc:
                lines.append(f"  not previewed: {type(exc).__name__}: {str(exc)[:120]}")
        elif kind:
            lines.append("  not previewed: pandas is not installed")
        blocks.append(lines)
    if not blocks:
        return "No files in the work dir."
    out, used = [], 0
    for i, lines in enumerate(blocks):
        block = "\n".join(lines)
        rest = [b[0] for b in blocks[i + 1:]]
        if used + len(block) + 1 <= BUDGET:
            out.append(block)
            used += len(block) + 1
            continue
        tail = f"[preview cut at {BUDGET} characters"
        tail += f"; not shown: {', '.join(rest)}]" if rest else "]"
        if BUDGET - used - len(tail) - 1 < 40:
            tail = "[preview cut]"
        room = BUDGET - used - len(tail) - 1
        if room > 8:
            out.append(block[: room - 4] + " ...")
        out.append(tail)
        break
    return "\n".join(out)[:BUDGET]
'''


def data_preview_code(
    names: Sequence[str] | None = None,
    budget_chars: int = 3000,
    *,
    rows: int = 3,
    max_columns: int = 30,
    max_read_bytes: int = 50_000_000,
) -> str:
    """A cell that prints a preview of data files in the kernel's cwd, at most ``budget_chars``.

    ``names`` are paths relative to the cwd (default: every non-hidden entry, data files
    first). Each file
    gets its name and size; CSV/TSV, Excel, Parquet and JSON files also get shape,
    columns (quoted, with dtypes), missing-value counts and ``rows`` rows, read with
    pandas in the kernel. The code runs in its own globals and leaves nothing behind.
    """
    settings = _preview_settings(names, budget_chars, rows, max_columns, max_read_bytes)
    return f"exec({_PREVIEW_SOURCE + 'print(_main())'!r}, {settings!r})"


def _preview_settings(
    names: Sequence[str] | None,
    budget_chars: int,
    rows: int = 3,
    max_columns: int = 30,
    max_read_bytes: int = 50_000_000,
) -> dict[str, Any]:
    return {
        "NAMES": None if names is None else [str(n) for n in names],
        "BUDGET": int(budget_chars),
        "ROWS": int(rows),
        "MAX_COLS": int(max_columns),
        "MAX_READ": int(max_read_bytes),
        "PARTIAL_ROWS": 10_000,
        "WIDTH": 100,
        "FOCUS": "",
        "FOCUS_OVER": 8,
        "EXTRA_COLS": 5,
        "FEW": 6,
    }


def data_preview_expression(
    names: Sequence[str] | None = None, budget_chars: int = 3000, focus: str = ""
) -> str:
    """The preview of :func:`data_preview_code` as a ``user_expression`` whose value is the text.

    Evaluated beside an empty cell, it takes no execution count and leaves no names, so
    a transcript and its clean notebook do not show it. Read it with
    :func:`parse_text_expression`. ``focus`` (the task): a table wider than 8 columns
    shows rows of only the columns it names, when it names any (all are still listed).
    """
    settings = _preview_settings(names, budget_chars)
    settings["FOCUS"] = focus.lower()[:4000]
    source = _PREVIEW_SOURCE + "__preview__ = _main()"
    return f"(lambda g: (exec({source!r}, g), g['__preview__'])[1])({settings!r})"


def parse_text_expression(mime_bundle: Mapping[str, Any] | None) -> str | None:
    """The string value of a ``user_expression`` (its ``text/plain`` repr), or None.

    None too for an answer of the wrong shape or longer than 64 K characters.
    """
    return expression_string(mime_bundle, _MAX_PROBE_CHARS)
