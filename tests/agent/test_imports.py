"""The imports a cell is missing: a well-known alias or name used and never imported.
Pure units (the auto_import lever in the loop: tests/agent/levers/test_auto_import.py)."""

from __future__ import annotations

import pytest

from kernel_agent.agent.imports import missing_imports

LIBS = {"pandas": "3.0", "numpy": "2.3", "scipy": "1.16"}


def needs(code, earlier=(), variables=(), libraries=LIBS):
    return missing_imports(
        code, earlier=list(earlier), variables=set(variables), libraries=dict(libraries)
    )


def test_the_aliases_a_cell_uses_and_nothing_binds_are_imported():
    code = (
        "t = pd.crosstab(a, b)\nchi2, p, dof, exp = stats.chi2_contingency(t)\nprint(np.sqrt(chi2))"
    )
    assert needs(code) == ["import numpy as np", "import pandas as pd", "from scipy import stats"]
    assert needs("print(math.pi)") == ["import math"]  # the standard library needs no probe


@pytest.mark.parametrize(
    ("code", "earlier", "variables", "libraries"),
    [
        ("import numpy as np\nprint(np.pi)", (), (), LIBS),  # the cell imports it
        ("print(stats.mode(x))", ("from scipy import stats",), (), LIBS),  # an earlier cell
        ("stats = {}\nstats.update(a=1)", (), (), LIBS),  # the cell binds the name
        ("stats.update(a=1)", (), ("stats",), LIBS),  # the kernel holds a variable so named
        ("def f(stats):\n    return stats.x", (), (), LIBS),  # a parameter
        ("print(sns.color_palette())", (), (), LIBS),  # seaborn is not importable
        ("print(np.pi)", (), (), {}),  # what the kernel can import is not known
        ("%%time\nprint(np.pi)", (), (), LIBS),  # a cell magic must stay first
        ("print(np.pi", (), (), LIBS),  # not Python
        ("print(stats)", (), (), LIBS),  # not used as a module
    ],
)
def test_nothing_is_added_where_it_could_be_wrong(code, earlier, variables, libraries):
    assert needs(code, earlier, variables, libraries) == []


def test_a_well_known_name_used_bare_gets_its_import():
    code = (
        "X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2)\n"
        "from sklearn.linear_model import LinearRegression\n"
        "m = LinearRegression().fit(X_train, y_train)\nr, p = pearsonr(a, b)"
    )
    libs = LIBS | {"sklearn": "1.7"}
    assert needs(code, libraries=libs) == [
        "from scipy.stats import pearsonr",
        "from sklearn.model_selection import train_test_split",
    ]
    assert needs("c = Counter(words)") == ["from collections import Counter"]
    assert needs("train_test_split(X, y)") == []  # sklearn is not importable here
    assert needs("pearsonr = 1\nprint(pearsonr)") == []  # the cell binds it
    assert needs("print(zscore(x))", variables=("zscore",)) == []  # the kernel holds it


def test_the_standard_library_of_no_data_tasks_is_imported_too():
    """A generic question on the bundled model: `calendar.day_name[...]` with no import
    cost it three cells (2026-11-27)."""
    code = "d = datetime.date(2024, 12, 31)\nprint(calendar.day_name[d.weekday()])"
    assert needs(code) == ["import calendar", "import datetime"]
    assert needs("from datetime import datetime\nprint(datetime.now())") == []  # bound


def test_the_tools_of_no_data_tasks_used_bare_get_their_import():
    """A generic question on the bundled model: `permutations(...)` with no import cost
    it the run (2026-12-07)."""
    code = "n = len(set(permutations('abc')))\nprint(factorial(3), quad(f, 0, 1)[0])"
    assert needs(code) == [  # in the order of the names
        "from math import factorial",
        "from itertools import permutations",
        "from scipy.integrate import quad",
    ]
    assert needs("print(date(2031, 7, 4) + timedelta(days=3))") == [
        "from datetime import date",
        "from datetime import timedelta",
    ]
    # names that are as often a variable or another module are left to the NameError
    assert needs("print(count)\nprint(bisect.bisect_left(a, 2))") == []
    assert needs("for date in dates:\n    print(date)") == []  # the cell binds it
