"""A cell is held against what the data preview measured, and corrected, before it runs.

On data nobody here has seen, the bundled model's failing cells were mostly ones a person
fixes in seconds and the model does not, even when the hint under the error says how: it
sends the same cell again (the messy suite's tuned half, 2026-11-27: ``KeyError:
'Species'`` for ``'Species '``, then ``'Delta 15 N'`` for ``'Delta 15 N (o/oo)'``, then
``'Flipper Length'``; a date format guessed wrong four times). The preview has measured
the facts those cells get wrong (``kernel_state/preview_facts.py``), so :func:`preflight`
writes them into the cell instead, before it runs:

- **column names as the file has them**: a string used as a column (``df['x']``,
  ``df[['x', 'y']]``, ``groupby('x')``, ``by=``/``subset=``/``x=``...) that names no
  column, where exactly one column is the same but for case, spaces, dots and
  underscores, or but for a unit in brackets (``'Flipper Length'`` for
  ``'Flipper Length (mm)'``);
- **the file's read call**: a ``read_csv``/``read_table`` of a previewed file gets the
  separator, encoding and decimal comma the preview read it with, and ``na_values`` for
  the marks a column writes for a missing value ('.', '?', '-'), unless the call says how
  it reads missing values (asked how many penguins have no Sex recorded, the model counted
  ``isna()`` and printed 0 of 11, the preview's fix line unread);
- **numbers stored as text**: after a top-level ``df = pd.read_csv(f)`` of a file whose
  numbers have thousands separators, currency or percent signs, or a few values that are
  not numbers (one corrupt row made Spotify's ``streams`` text; ``sum()`` then joined the
  strings), the line that reads them as numbers, for each column the cell does not
  convert itself;
- **a value in a filter**: ``df['Species'] == 'Adelie'`` where the column holds
  'Adelie Penguin (Pygoscelis adeliae)' (the filter would match nothing, and the answer
  be ``nan``): the one value that is the literal but for case and spaces, or starts with it;
- **the date format**: ``to_datetime`` of a previewed date column gets the format that
  parses (nearly) every value, in place of another one or of none;
- **an integer cast of a column with gaps**: ``.astype(int)`` of a column of whole numbers
  the preview found missing values in raises; ``.astype('Int64')`` keeps the gaps;
- **missing values in a test**: a ``stats.ttest_ind``, ``mannwhitneyu``, ``spearmanr``...
  that takes ``nan_policy`` gets ``nan_policy='omit'`` (with a missing value it is ``nan``);
- **a part of a date**: ``df['Year']`` where no column is one and the file has one date
  column: that column's year, parsed with its format;
- **paired columns with gaps**: ``stats.pearsonr(df['a'], df['b'])`` (``linregress``,
  ``pointbiserialr``: no ``nan_policy``) is ``nan`` when either column has a gap; the
  pairs with both values are kept, ``*df[['a', 'b']].dropna().to_numpy().T``;
- **in place on a column**: ``df['Age'].fillna(m, inplace=True)`` changes nothing under
  pandas 3's copy-on-write (a warning, and the mean of the unfilled column): it becomes
  ``df['Age'] = df['Age'].fillna(m)``;
- **an answer slot written as code**: a line ``@name[expr]`` (Python reads a decorator;
  the cell cannot parse) becomes the ``print`` that shows it;
- **a numbered column quoted**: ``df['0']`` of a file the preview read with no header
  line (its columns are the numbers 0, 1 ...) is ``df[0]``;
- **a name with its own quote in it**: ``df['Chiffre d'affaires (EUR)']`` cannot parse
  (the model sent it four times, each a ``SyntaxError``); a cell that does not parse has
  each column name that holds a quote, written between that quote, written as Python
  writes the name (``"Chiffre d'affaires (EUR)"``), when the cell then parses.

Nothing is guessed: a name with two candidates, a cell that renames columns (or a task
that did; the strip the preview advises, ``df.columns = df.columns.str.strip()``, is
followed: the names are then the stripped ones), a frame whose columns the kernel's
report cut short, keep the cell as it is. The cell that runs, the transcript and the
clean notebook hold the corrected code. The ``preflight`` lever
(:mod:`..levers.preflight`) applies it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..code_text import parse_python
from ..slots import CODE_LINE
from .calls import (
    _after_read_edits,
    _date_format_edits,
    _date_part_edits,
    _explode_edits,
    _inplace_column_edits,
    _int_cast_edits,
    _nan_policy_edits,
    _paired_gaps_edits,
    _read_call_edits,
)
from .edits import _Edit, _read_file
from .names import STRIP_NAMES, _column_fixes, _column_strings, _value_edits

if TYPE_CHECKING:
    from ...kernel_state.namespace import VariableInfo
    from ...kernel_state.preview_facts import FileFacts

__all__ = ["preflight"]


def preflight(
    code: str,
    facts: Mapping[str, FileFacts],
    namespace: Mapping[str, VariableInfo] | None = None,
    earlier: Sequence[str] = (),
    scipy: str = "",
) -> str:
    """``code`` with what the preview measured written in (see the module); else unchanged.

    ``scipy``: the kernel's scipy version ("" when unknown: only the tests that have taken
    ``nan_policy`` since scipy 1.9 get it)."""
    code = _quoted_names(_slot_lines(code, namespace or {}), facts, namespace or {})
    tree = parse_python(code)
    if tree is None or not facts:
        return code
    encoded = code.encode()
    starts = [0]
    for line in encoded.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def span(node: ast.expr | ast.stmt | ast.keyword) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return (
            starts[node.lineno - 1] + node.col_offset,
            starts[node.end_lineno - 1] + node.end_col_offset,
        )

    stripped = _names_stripped(code, tree, facts, namespace or {}, earlier)
    if stripped is None:
        return code  # names used both before and after the cell strips them
    if stripped:
        facts = {name: _stripped(file) for name, file in facts.items()}
    renames = {name: value for name, value in _column_fixes(tree, code, facts, namespace, earlier)}
    numbered = _numbered_columns(facts)
    edits: list[_Edit] = []
    for node, name in _column_strings(tree, namespace, stores=True):
        if name in renames:
            edits.append(_Edit(*span(node), repr(renames[name])))
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        edits += _read_call_edits(call, facts, span)
        edits += _date_format_edits(call, facts, renames, span)
    edits += _after_read_edits(tree, code, facts, span)
    edits += _explode_edits(tree, code, facts, span)
    edits += _value_edits(tree, facts, renames, span)
    edits += _nan_policy_edits(tree, scipy, span)
    edits += _inplace_column_edits(tree, span)
    edits += _paired_gaps_edits(tree, span)
    edits += _int_cast_edits(tree, facts, renames, span)
    edits += _date_part_edits(tree, code, facts, namespace or {}, earlier, span)
    edits += [_Edit(*span(n), v) for n, v in _column_strings(tree, namespace) if v in numbered]
    if not edits:
        return code
    out = encoded
    last = len(encoded) + 1
    for edit in sorted(set(edits), reverse=True):
        if edit.end > last:
            continue  # overlaps an edit already made: keep the first
        out = out[: edit.start] + edit.text.encode() + out[edit.end :]
        last = edit.start
    fixed = out.decode()
    return fixed if parse_python(fixed) is not None else code


# ------------------------------------------------------------------ names stripped
def _names_stripped(
    code: str,
    tree: ast.AST,
    facts: Mapping[str, FileFacts],
    namespace: Mapping[str, VariableInfo],
    earlier: Sequence[str],
) -> bool | None:
    """The columns are named stripped where the cell uses them: it strips them (as the
    preview advises) before its first column name, or an earlier cell did and this one
    reads no file again. None: the cell uses names both before and after its strip."""
    found = STRIP_NAMES.search(code)
    if found is not None:
        line = code.count("\n", 0, found.start()) + 1
        used = [node.lineno > line for node, _ in _column_strings(tree, namespace)]
        return True if all(used) else None if any(used) else False
    reads = any(_read_file(call, facts) for call in ast.walk(tree) if isinstance(call, ast.Call))
    return not reads and any(STRIP_NAMES.search(before) for before in earlier)


def _stripped(file: FileFacts) -> FileFacts:
    """The facts with every column name stripped of its end spaces."""

    def names(columns: Sequence[str]) -> tuple[str, ...]:
        return tuple(c.strip() for c in columns)

    return replace(
        file,
        columns=names(file.columns),
        dates={c.strip(): f for c, f in file.dates.items()},
        numeric=names(file.numeric),
        units=names(file.units),
        whole=names(file.whole),
        values={c.strip(): v for c, v in file.values.items()},
    )


# ------------------------------------------------------------------ numbered columns
def _numbered_columns(facts: Mapping[str, FileFacts]) -> frozenset[str]:
    """'0', '1' ...: the columns of a file read with no header line are the numbers 0, 1 ...,
    which ``df['0']`` does not find (``KeyError: '0'``, sent four times in a row); empty
    when another previewed file has a column of that name."""
    numbered = {str(i) for f in facts.values() if f.headerless for i in range(len(f.columns))}
    named = {c for f in facts.values() if not f.headerless for c in f.columns}
    return frozenset(numbered - named) if not numbered & named else frozenset()


# ------------------------------------------------------------------ names with a quote
def _quoted_names(
    code: str, facts: Mapping[str, FileFacts], namespace: Mapping[str, VariableInfo]
) -> str:
    """A cell that cannot parse, with each column name that holds a quote and is written
    between that quote (``'d'affaires'``) written as Python writes it, if it then parses."""
    if ("'" not in code and '"' not in code) or parse_python(code) is not None:
        return code
    names = {c for file in facts.values() for c in file.columns}
    names.update(c for info in namespace.values() for c in info.columns or ())
    fixed = code
    for name in sorted(names, key=len, reverse=True):
        for quote in {"'", '"'} & set(name):
            fixed = fixed.replace(quote + name + quote, repr(name))
    return fixed if fixed != code and parse_python(fixed) is not None else code


# ------------------------------------------------------------------ answer slots as code
def _slot_lines(code: str, namespace: Mapping[str, VariableInfo]) -> str:
    """A cell that cannot parse, with each ``@name[expr]`` line made a print of it."""
    if "@" not in code or parse_python(code) is not None:
        return code
    lines = code.split("\n")
    if _stated_only(lines, namespace):
        return code  # an answer written in a fence: prose_cell asks for it as text
    changed = False
    for i, line in enumerate(lines):
        match = CODE_LINE.match(line)
        if match is None:
            continue
        indent, name, inner = match["indent"], match["name"], match["inner"].strip()
        expr = _slot_expr(inner)
        is_text = expr is None or (isinstance(expr, ast.Name) and expr.id not in namespace)
        if is_text:
            lines[i] = f"{indent}print({f'@{name}[{inner}]'!r})"
        else:
            lines[i] = f"{indent}print({f'@{name}['!r} + str({inner}) + ']')"
        changed = True
    fixed = "\n".join(lines)
    return fixed if changed and parse_python(fixed) is not None else code


def _slot_expr(inner: str) -> ast.expr | None:
    """A slot's value as a Python expression, or None where it is not one (text)."""
    try:
        return ast.parse(inner, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _stated_only(lines: Sequence[str], namespace: Mapping[str, VariableInfo]) -> bool:
    """Every line of the cell (but blanks and comments) is a slot whose value computes
    nothing: a literal (``@arrangements[20324]``) or text. Printed, such a cell would pass a
    value from the model's memory off as one a cell computed (a generic question answered
    so, 2026-12-07); left as written, it is an answer in a fence, and is asked for as text
    (then held against what the cells printed)."""
    slots = 0
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = CODE_LINE.match(line)
        if match is None:
            return False
        expr = _slot_expr(match["inner"].strip())
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            expr = expr.operand
        literal = expr is None or isinstance(expr, ast.Constant)
        if not (literal or (isinstance(expr, ast.Name) and expr.id not in namespace)):
            return False
        slots += 1
    return slots > 0
