"""Short hints appended to an error the model must fix: the mistakes small models repeat.

Pure: built from the error, the cell's code and the namespace summary.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from ..kernel_state.namespace import VariableInfo
from ..results import CellResult

__all__ = ["error_hint"]

_COMMON_IMPORTS = {
    "plt": "import matplotlib.pyplot as plt",
    "np": "import numpy as np",
    "pd": "import pandas as pd",
    "math": "import math",
    "os": "import os",
    "re": "import re",
    "json": "import json",
    "random": "import random",
    "statistics": "import statistics",
    "datetime": "import datetime",
}
_NAME_ERROR = re.compile(r"name '([A-Za-z_]\w*)' is not defined")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_ANSWER_SLOT = re.compile(r"@[A-Za-z_]\w*\[")


def _squash(name: str) -> str:
    """A column name without case, spaces and punctuation: ``row_mz`` is ``row m/z``."""
    return re.sub(r"[\W_]+", "", str(name)).lower()


def error_hint(
    result: CellResult,
    namespace: dict[str, VariableInfo],
    libraries: Mapping[str, str] | None = None,
    install_policy: str = "never",
) -> str:
    """A hint for the model, or "" when there is nothing useful to add.

    ``libraries`` is what the kernel can import (``{import name: version}``), when known.
    """
    error = result.error
    if error is None or result.status != "error":
        return ""
    if error.ename == "SyntaxError" and _ANSWER_SLOT.search(result.code):
        return (
            "Hint: the @name[value] form is for your final answer text, not for code. "
            "Print the values plainly in code; write the @name[value] answer in prose."
        )
    if error.ename == "NameError" and (match := _NAME_ERROR.search(error.evalue)):
        return _name_error(match.group(1), result.code, namespace)
    if error.ename in ("ModuleNotFoundError", "ImportError") and (
        match := _MISSING_MODULE.search(error.evalue)
    ):
        have = ", ".join(sorted(libraries)) if libraries else "numpy, pandas, matplotlib"
        if install_policy != "never":
            return (
                f"Hint: the module {match.group(1)!r} is not installed. Use what is available "
                f"({have}), or call install_package({match.group(1).split('.')[0]!r}) "
                f"(policy: {install_policy}); shell installs do not work here."
            )
        return (
            f"Hint: the module {match.group(1)!r} is not installed and cannot be installed here "
            f"(no network). Use what is available: the standard library, {have}."
        )
    if error.ename == "KeyError":
        frames = [v for v in namespace.values() if v.columns]
        key = error.evalue.strip().strip("'\"")
        for frame in frames:
            close = [c for c in frame.columns or () if _squash(c) == _squash(key)]
            close = close or difflib.get_close_matches(key, list(frame.columns or ()), n=1)
            if close:
                return (
                    f"Hint: there is no column {key!r}, "
                    f"but {frame.name} has a column {close[0]!r}. "
                    f"Use {frame.name}[{close[0]!r}] (column names are case-sensitive)."
                )
        if frames:
            listed = "; ".join(
                f"{v.name} has columns {', '.join(v.columns or ())}" for v in frames[:3]
            )
            return f"Hint: {listed}. Column names are case-sensitive."
    if error.ename == "FileNotFoundError":
        return (
            "Hint: list the working directory (import os; print(os.listdir())) "
            "to see which files exist."
        )
    return ""


def _name_error(name: str, code: str, namespace: dict[str, VariableInfo]) -> str:
    if name in _COMMON_IMPORTS and not re.search(rf"^\s*{name}\s*=", code, re.M):
        return (
            f"Hint: `{name}` is a module that was never imported. "
            f"Add `{_COMMON_IMPORTS[name]}` at the top of the cell."
        )
    if re.search(rf"^\s*{name}\s*=.*\b{name}\b", code, re.M):
        return (
            f"Hint: `{name}` is used on the right-hand side of its own assignment, "
            "before it exists. "
            "Compute the values it needs first (in separate variables or statements), "
            f"then build `{name}`."
        )
    existing = ", ".join(sorted(namespace)[:20]) or "none yet"
    return f"Hint: no variable `{name}` exists in the kernel. Variables that exist: {existing}."
