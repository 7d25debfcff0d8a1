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
from .preview_source import PREVIEW_SOURCE

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


#: extensions of files that are never previewed as a delimited table
_NOT_TABLES = frozenset(
    "py ipynb md rst html htm xml yaml yml toml ini cfg sh js css png jpg jpeg gif svg pdf zip "
    "gz bz2 xz tar 7z pkl pickle npy npz h5 hdf5 db sqlite feather orc avro so whl log".split()
)


#: what separates the preview's text from its facts (JSON) in the expression's value
FACTS_MARK = "\n\x1e preview facts: "


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
    settings["WITH_FACTS"], settings["FACTS_MARK"] = False, FACTS_MARK
    return f"exec({PREVIEW_SOURCE + 'print(_main())'!r}, {settings!r})"


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
        "NOT_TABLES": _NOT_TABLES,
    }


def data_preview_expression(
    names: Sequence[str] | None = None,
    budget_chars: int = 3000,
    focus: str = "",
    *,
    facts: bool = False,
) -> str:
    """The preview of :func:`data_preview_code` as a ``user_expression`` whose value is the text.

    Evaluated beside an empty cell, it takes no execution count and leaves no names, so
    a transcript and its clean notebook do not show it. Read it with
    :func:`parse_text_expression`. ``focus`` (the task): a table wider than 8 columns
    shows rows of only the columns it names, when it names any (all are still listed).
    ``facts``: the text is followed by what the preview measured, for
    :func:`~kernel_agent.kernel_state.preview_facts.split_facts`.
    """
    settings = _preview_settings(names, budget_chars)
    settings["FOCUS"] = focus.lower()[:4000]
    settings["WITH_FACTS"], settings["FACTS_MARK"] = facts, FACTS_MARK
    source = PREVIEW_SOURCE + "__preview__ = _with_facts()"
    return f"(lambda g: (exec({source!r}, g), g['__preview__'])[1])({settings!r})"


def parse_text_expression(mime_bundle: Mapping[str, Any] | None) -> str | None:
    """The string value of a ``user_expression`` (its ``text/plain`` repr), or None.

    None too for an answer of the wrong shape or longer than 64 K characters.
    """
    return expression_string(mime_bundle, _MAX_PROBE_CHARS)
