"""A cell that uses a well-known module alias or name it never imported gets the import first.

Small models write ``stats.chi2_contingency(...)`` or ``np.sqrt(...)`` and forget the
import; told of the NameError, they often send the same cell again (in the eval's
transcripts of 2026-11-25, three failed tasks ended so). :func:`missing_imports` finds the
conventional import line that the ``auto_import`` lever adds at the top of such a cell: the
cell that runs, the transcript and the clean notebook all hold the line. The model is not
told: the kernel has the module from then on, and told, the bundled model sent the note
back as a cell.

The same for a library's well-known function or class used by its bare name with no
import (``train_test_split(...)``): :data:`COMMON_NAMES` gives its one import line.

Nothing is guessed: only the aliases below, used as ``alias.attr``, and those names; never
a name the cell or an earlier cell of the task binds (by import, assignment, ``def``...)
nor one the kernel holds as a variable; only a module the kernel can import (its probed
libraries; the standard library's always); never in a cell that starts with a cell magic
or has a ``__future__`` import. Python kernels only (the libraries are probed there
alone).
"""

from __future__ import annotations

import ast

from .code_text import parse_python

__all__ = ["COMMON_ALIASES", "COMMON_NAMES", "missing_imports"]

#: alias -> (its import line, the import name the kernel must have; "" for the stdlib)
COMMON_ALIASES: dict[str, tuple[str, str]] = {
    "pd": ("import pandas as pd", "pandas"),
    "np": ("import numpy as np", "numpy"),
    "plt": ("import matplotlib.pyplot as plt", "matplotlib"),
    "stats": ("from scipy import stats", "scipy"),
    "sm": ("import statsmodels.api as sm", "statsmodels"),
    "smf": ("import statsmodels.formula.api as smf", "statsmodels"),
    "sns": ("import seaborn as sns", "seaborn"),
    "math": ("import math", ""),
    "statistics": ("import statistics", ""),
    "re": ("import re", ""),
    "json": ("import json", ""),
    # the standard library of no-data tasks (dates, sequences, puzzles): `calendar.day_name`
    # unimported cost a generic question three cells (2026-11-27)
    **{
        name: (f"import {name}", "")
        for name in (
            "datetime calendar itertools functools collections string fractions decimal random"
        ).split()
    },
}

#: a library's well-known function or class used by its bare name -> (import line, import name)
COMMON_NAMES: dict[str, tuple[str, str]] = {
    **{
        name: (f"from sklearn.{module} import {name}", "sklearn")
        for module, names in (
            ("model_selection", "train_test_split cross_val_score KFold GridSearchCV"),
            ("linear_model", "LinearRegression LogisticRegression Ridge Lasso"),
            ("preprocessing", "StandardScaler MinMaxScaler LabelEncoder OneHotEncoder"),
            ("ensemble", "RandomForestClassifier RandomForestRegressor"),
            ("tree", "DecisionTreeClassifier DecisionTreeRegressor"),
            ("cluster", "KMeans"),
            ("decomposition", "PCA"),
            ("neighbors", "KNeighborsClassifier KNeighborsRegressor"),
            (
                "metrics",
                "mean_squared_error mean_absolute_error r2_score accuracy_score f1_score "
                "precision_score recall_score confusion_matrix classification_report "
                "roc_auc_score",
            ),
        )
        for name in names.split()
    },
    **{
        name: (f"from scipy.stats import {name}", "scipy")
        for name in (
            "pearsonr spearmanr kendalltau ttest_ind ttest_rel ttest_1samp chi2_contingency "
            "f_oneway shapiro mannwhitneyu kruskal linregress zscore levene normaltest "
            "chisquare wilcoxon"
        ).split()
    },
    # the standard library's and scipy's tools of no-data tasks, used bare: `permutations`
    # unimported cost a generic question its run (2026-12-07)
    **{
        name: (f"from {module} import {name}", library)
        for module, library, names in (
            ("collections", "", "Counter defaultdict deque namedtuple"),
            (
                "itertools",
                "",
                "permutations combinations combinations_with_replacement product accumulate "
                "islice chain",
            ),
            ("functools", "", "reduce lru_cache cache"),
            ("math", "", "factorial comb perm gcd lcm isqrt"),
            ("fractions", "", "Fraction"),
            ("decimal", "", "Decimal"),
            ("scipy.integrate", "scipy", "quad"),
            ("scipy.optimize", "scipy", "brentq minimize_scalar fsolve"),
            ("datetime", "", "date timedelta"),
        )
        for name in names.split()
    },
}


def _bound(tree: ast.AST) -> set[str]:
    """Every name ``tree`` binds: assigned, imported, defined, a parameter, caught..."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names


def missing_imports(
    code: str, *, earlier: list[str], variables: set[str], libraries: dict[str, str]
) -> list[str]:
    """The import lines ``code`` needs for the aliases it uses and nothing defines.

    ``earlier``: the code of the task's earlier cells; ``variables``: the kernel's
    variable names; ``libraries``: what the kernel can import (empty: not known, so nothing
    is added).
    """
    if not libraries or code.lstrip().startswith("%%") or "__future__" in code:
        return []
    tree = parse_python(code)
    if tree is None:
        return []
    used = {
        node.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and isinstance(node.value.ctx, ast.Load)
        and node.value.id in COMMON_ALIASES
    } | {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in COMMON_NAMES
    }
    if not used:
        return []
    taken = _bound(tree) | variables
    for before in earlier:
        parsed = parse_python(before)
        if parsed is not None:
            taken |= _bound(parsed)
    lines = []
    for alias in sorted(used - taken):
        line, needs = COMMON_ALIASES.get(alias) or COMMON_NAMES[alias]
        if not needs or needs in libraries:
            lines.append(line)
    return lines
