"""A failing cell's error text, the namespace report and the data preview all come from the
kernel: hostile input to the error hint, which quotes them to the model.

The property: whatever the kernel sends, in any error class the hints know or not, a hint
is at most ``MAX_HINT_CHARS`` long (payloads below were not written for any one branch).
"""

from __future__ import annotations

import random
from datetime import datetime, timezone

from kernel_agent.agent.hints import MAX_HINT_CHARS, error_hint
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.results import CellError, CellResult

NOW = datetime.now(timezone.utc)
BIG = "q" * 200_000
ENAMES = [
    "NameError", "KeyError", "ModuleNotFoundError", "ImportError", "ValueError", "TypeError",
    "AttributeError", "ParserError", "UnicodeDecodeError", "SyntaxError", "FileNotFoundError",
    "IndexError", "ZeroDivisionError", "Whatever",
]  # fmt: skip
EVALUES = [
    f"name '{BIG}' is not defined",
    f"'{BIG}'",
    f"No module named '{BIG}'",
    f"could not convert string to float: '{BIG}'",
    f"Error tokenizing data. C error: Expected 2 fields in line 3, saw {BIG}",
    f"cannot unpack non-iterable {BIG} object",
    f"too many values to unpack {BIG}",
    f"time data '{BIG}' doesn't match format",
    f"The truth value of a Series is ambiguous. {BIG}",
    f"Cannot perform 'rand_' with a dtyped [{BIG}] array",
    BIG,
]
CODES = [
    f"df = pd.read_csv('{BIG[:5000]}', skiprows=1)\ndf['{BIG[:5000]}']",
    f"@x[{BIG[:5000]}]",
    "print(max(d, key=abs))\nx = df.idxmax()\n" + "y = 1\n" * 5000,
    "import pandas as pd\nq = 1",
    f"n = df[df['{BIG[:5000]}'] > 1 & df.b < 2]",
    f"n = sum(m & df['{BIG[:5000]}'] < f)",
]


def _namespace(rng: random.Random) -> dict[str, VariableInfo]:
    columns = tuple("c" * rng.randint(1, 3000) + str(i) for i in range(rng.randint(1, 60)))
    names = ["q" * rng.randint(1, 5000) + str(i) for i in range(rng.randint(1, 40))]
    return {n: VariableInfo(n, "DataFrame", columns=columns) for n in names}


def test_every_hint_is_bounded_whatever_the_kernel_sent():
    rng = random.Random(31)
    told = [f"x.csv\n  columns: '{BIG}' str\n  read it with: df = pd.read_csv('{BIG}')\n  ! {BIG}"]
    for ename in ENAMES:
        for evalue in EVALUES:
            code = rng.choice(CODES)
            cell = CellResult(code, "error", 1, [], CellError(ename, evalue, []), NOW, NOW)
            hint = error_hint(cell, _namespace(rng), {BIG: BIG}, rng.choice(["never", "any"]), told)
            assert len(hint) <= MAX_HINT_CHARS, (ename, evalue[:40], len(hint))
