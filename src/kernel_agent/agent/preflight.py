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
  separator, encoding and decimal comma the preview read it with;
- **numbers stored as text**: after a top-level ``df = pd.read_csv(f)`` of a file whose
  numbers have thousands separators, currency or percent signs, or a few values that are
  not numbers (one corrupt row made Spotify's ``streams`` text; ``sum()`` then joined the
  strings), the line that reads them as numbers, unless the cell converts columns itself;
- **a value in a filter**: ``df['Species'] == 'Adelie'`` where the column holds
  'Adelie Penguin (Pygoscelis adeliae)' (the filter would match nothing, and the answer
  be ``nan``): the one value that is the literal but for case and spaces, or starts with it;
- **the date format**: ``to_datetime`` of a previewed date column gets the format that
  parses (nearly) every value, in place of another one or of none;
- **missing values in a test**: a ``stats.ttest_ind``, ``mannwhitneyu``, ``spearmanr``...
  that takes ``nan_policy`` gets ``nan_policy='omit'`` (with a missing value it is ``nan``);
- **a part of a date**: ``df['Year']`` where no column is one and the file has one date
  column: that column's year, parsed with its format;
- **an answer slot written as code**: a line ``@name[expr]`` (Python reads a decorator;
  the cell cannot parse) becomes the ``print`` that shows it.

Nothing is guessed: a name with two candidates, a cell that renames columns (or a task
that did), a frame whose columns the kernel's report cut short, keep the cell as it is.
The cell that runs, the transcript and the clean notebook hold the corrected code.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .imports import parse_python
from .lever import Lever
from .state import TaskState

if TYPE_CHECKING:
    from ..kernel_state.namespace import VariableInfo
    from ..kernel_state.preview_facts import FileFacts

__all__ = ["Preflight", "preflight"]

#: methods whose string arguments (and list-of-string arguments) name columns
_COLUMN_METHODS = frozenset(
    "groupby sort_values set_index dropna drop_duplicates nlargest nsmallest pivot_table "
    "pivot melt value_counts duplicated".split()
)
#: keywords whose string (or list-of-string) value names columns, in any call
_COLUMN_KEYWORDS = frozenset(
    "by subset on left_on right_on index values x y hue id_vars value_vars column".split()
)
_READERS = {"read_csv": ",", "read_table": "\t"}
#: where a node is in the code: (start, end) byte offsets
Span = Callable[[ast.expr | ast.stmt], tuple[int, int]]
_SLOT_LINE = re.compile(r"^(?P<indent>[ \t]*)@(?P<name>[A-Za-z_]\w*)\[(?P<inner>.*)\][ \t]*$")


@dataclass(frozen=True, order=True)
class _Edit:
    start: int  # byte offsets in the utf-8 code
    end: int
    text: str


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
    code = _slot_lines(code, namespace or {})
    tree = parse_python(code)
    if tree is None or not facts:
        return code
    encoded = code.encode()
    starts = [0]
    for line in encoded.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def span(node: ast.expr | ast.stmt) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return (
            starts[node.lineno - 1] + node.col_offset,
            starts[node.end_lineno - 1] + node.end_col_offset,
        )

    renames = {name: value for name, value in _column_fixes(tree, code, facts, namespace, earlier)}
    edits: list[_Edit] = []
    for node, name in _column_strings(tree, namespace, stores=True):
        if name in renames:
            edits.append(_Edit(*span(node), repr(renames[name])))
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        edits += _read_call_edits(call, facts, span)
        edits += _date_format_edits(call, facts, renames, span)
    edits += _numbers_as_text_edits(tree, code, facts, span)
    edits += _value_edits(tree, facts, renames, span)
    edits += _nan_policy_edits(tree, scipy, span)
    edits += _date_part_edits(tree, code, facts, namespace or {}, earlier, span)
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


# ------------------------------------------------------------------ column names
def _key(name: str) -> str:
    return re.sub(r"[\W_]+", "", name.casefold())


def _bare(name: str) -> str:
    """The name without a unit in brackets: 'Flipper Length (mm)' -> 'flipperlength'."""
    return _key(re.sub(r"\s*[(\[][^)\]]*[)\]]", "", name))


def _match(literal: str, columns: Iterable[str]) -> str | None:
    """The one column ``literal`` means, or None (none, or more than one)."""
    for same in (_key, _bare):
        key = same(literal)
        if len(key) < 2:
            return None
        found = {c for c in columns if same(c) == key}
        if found:
            return found.pop() if len(found) == 1 else None
    return None


def _strings(node: ast.expr) -> list[ast.Constant]:
    """A string constant, or the string constants of a list or tuple of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.List | ast.Tuple):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _not_frames(tree: ast.AST, namespace: Mapping[str, VariableInfo]) -> set[str]:
    """Names that hold no frame: the kernel says so, or the cell binds a dict to them."""
    names = {n for n, v in namespace.items() if v.columns is None and v.type != "Series"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (
            isinstance(node.value, ast.Dict | ast.DictComp)
            or isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in ("dict", "defaultdict", "Counter", "OrderedDict")
        ):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _column_strings(
    tree: ast.AST, namespace: Mapping[str, VariableInfo] | None = None, *, stores: bool = False
) -> list[tuple[ast.Constant, str]]:
    """Every string the code reads as a column name (not a dict's key); with ``stores``,
    also those it assigns to (``df['x'] = ...``)."""
    found: list[ast.Constant] = []
    skip = _not_frames(tree, namespace or {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and (stores or isinstance(node.ctx, ast.Load)):
            if isinstance(node.value, ast.Name) and node.value.id in skip:
                continue
            found += _strings(node.slice)
        elif isinstance(node, ast.Call):
            func = node.func
            method = func.attr if isinstance(func, ast.Attribute) else ""
            if method in _COLUMN_METHODS:
                for arg in node.args:
                    found += _strings(arg)
            for keyword in node.keywords:
                if keyword.arg in _COLUMN_KEYWORDS:
                    found += _strings(keyword.value)
    return [(node, str(node.value)) for node in found]


def _stored_strings(tree: ast.AST) -> dict[str, int]:
    """Column names the code makes (``df['new'] = ...``, ``assign(new=...)``), with the
    first line that makes each."""
    made: dict[str, int] = {}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            names = [str(c.value) for c in _strings(node.slice)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "assign":
                names = [k.arg for k in node.keywords if k.arg]
        line = getattr(node, "lineno", 0)
        for name in names:
            made[name] = min(made.get(name, line), line)
    return made


_RENAMES = re.compile(
    r"\.columns\s*=|\.rename\s*\(|\.columns\.str\.|set_axis\s*\(|add_prefix|add_suffix"
)


def _column_fixes(
    tree: ast.AST,
    code: str,
    facts: Mapping[str, FileFacts],
    namespace: Mapping[str, VariableInfo] | None,
    earlier: Sequence[str],
) -> list[tuple[str, str]]:
    """(written, meant) for each column name to correct; none when names may have changed."""
    if any(_RENAMES.search(c) for c in (code, *earlier)):
        return []
    frames = [v for v in (namespace or {}).values() if v.columns is not None]
    reads_file = any(
        _read_file(call, facts) for call in ast.walk(tree) if isinstance(call, ast.Call)
    )
    if any(_cut_short(v) for v in frames) and not reads_file:
        return []  # a frame the kernel listed in part: its other columns are not known
    columns = {c for f in facts.values() for c in f.columns}
    reads: dict[str, int] = {}
    for node, name in _column_strings(tree, namespace):
        reads[name] = min(reads.get(name, node.lineno), node.lineno)
    loaded = set(reads)
    known = columns | {c for v in frames for c in (v.columns or ())}
    for before in earlier:
        parsed = parse_python(before)
        if parsed is not None:
            known |= _stored_strings(parsed).keys()
    # a column the cell makes is known, unless the cell reads it first (or in the same
    # line), misspelt: v['date vote'] = pd.to_datetime(v['date vote']) converts 'Date Vote'
    for name, line in _stored_strings(tree).items():
        if reads.get(name, line + 1) > line:
            known.add(name)
    fixes = []
    for name in sorted(loaded):
        if name in known:
            continue
        meant = _match(name, columns)
        if meant is not None:
            fixes.append((name, meant))
    return fixes


def _cut_short(info: VariableInfo) -> bool:
    match = re.fullmatch(r"\(\s*\d+\s*,\s*(\d+)\s*\)", info.shape or "")
    return match is None or int(match.group(1)) > len(info.columns or ())


# ------------------------------------------------------------------ read calls
def _called(call: ast.Call) -> str:
    """The name of the function or method a call calls ("" for another callee)."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _read_file(call: ast.Call, facts: Mapping[str, FileFacts]) -> FileFacts | None:
    func = call.func
    name = (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )
    if name not in _READERS or not call.args:
        return None
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    path = posixpath.normpath(first.value)
    found = facts.get(path)
    return found if found is not None and found.delimited else None


def _read_call_edits(call: ast.Call, facts: Mapping[str, FileFacts], span: Span) -> list[_Edit]:
    file = _read_file(call, facts)
    if file is None:
        return []
    reader = _called(call)
    keywords = {k.arg: k for k in call.keywords if k.arg}
    edits: list[_Edit] = []
    added: list[str] = []
    sep_kw = keywords.get("sep") or keywords.get("delimiter")
    if sep_kw is None:
        if file.sep != _READERS[reader]:
            added.append(f"sep={file.sep!r}")
    elif isinstance(sep_kw.value, ast.Constant) and isinstance(sep_kw.value.value, str):
        if sep_kw.value.value != file.sep and not sep_kw.value.value.startswith(r"\s"):
            edits.append(_Edit(*span(sep_kw.value), repr(file.sep)))
    if file.encoding.lower() not in ("utf-8", "utf8"):
        enc = keywords.get("encoding")
        if enc is None:
            added.append(f"encoding={file.encoding!r}")
        elif isinstance(enc.value, ast.Constant) and str(enc.value.value).lower().replace(
            "_", "-"
        ) in (
            "utf-8",
            "utf8",
        ):
            edits.append(_Edit(*span(enc.value), repr(file.encoding)))
    if file.decimal_comma and "decimal" not in keywords:
        added.append("decimal=','")
    if added and not any(k.arg is None for k in call.keywords):  # no **kwargs to clash with
        last = [*call.args, *(k.value for k in call.keywords)][-1]
        end = span(last)[1]
        edits.append(_Edit(end, end, ", " + ", ".join(added)))
    return edits


# ------------------------------------------------------------------ values in filters
def _value_edits(
    tree: ast.AST, facts: Mapping[str, FileFacts], renames: Mapping[str, str], span: Span
) -> list[_Edit]:
    """``df[c] == 'Adelie'`` where no value of ``c`` is 'Adelie' and exactly one is but for
    case and spaces, or starts with it ('Adelie Penguin (Pygoscelis adeliae)'): that one."""
    edits = []
    for node in ast.walk(tree):
        literals: list[ast.Constant] = []
        target: ast.expr | None = None
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq | ast.NotEq)
        ):
            target, literals = node.left, _strings(node.comparators[0])
        elif (
            isinstance(node, ast.Call)
            and _called(node) == "isin"
            and isinstance(node.func, ast.Attribute)
            and node.args
        ):
            target, literals = node.func.value, _strings(node.args[0])
        if not isinstance(target, ast.Subscript) or not literals:
            continue
        names = _strings(target.slice)
        if len(names) != 1:
            continue
        column = renames.get(str(names[0].value), str(names[0].value))
        values = {v for f in facts.values() for v in f.values.get(column, ())}
        for literal in literals:
            meant = _value_match(str(literal.value), values)
            if meant is not None:
                edits.append(_Edit(*span(literal), repr(meant)))
    return edits


def _value_match(literal: str, values: set[str]) -> str | None:
    if not values or literal in values or not literal.strip():
        return None
    same = {v for v in values if _key(v) == _key(literal)}
    if same:
        return same.pop() if len(same) == 1 else None
    low = literal.strip().casefold()
    starts = {
        v
        for v in values
        if v.casefold().startswith(low) and not v[len(low) : len(low) + 1].isalnum()
    }
    return starts.pop() if len(starts) == 1 else None


# ------------------------------------------------------------------ missing values in tests
#: scipy.stats functions that take nan_policy since scipy 1.9 at the latest
_NAN_POLICY = frozenset(
    "ttest_ind ttest_rel ttest_1samp kruskal spearmanr kendalltau skew kurtosis zscore sem "
    "describe mannwhitneyu wilcoxon normaltest".split()
)
#: and those that take it since scipy 1.11
_NAN_POLICY_1_11 = frozenset("shapiro f_oneway levene bartlett".split())


def _nan_policy_edits(tree: ast.AST, scipy: str, span: Span) -> list[_Edit]:
    """``stats.ttest_ind(a, b)`` on a column with missing values is ``nan``, and the
    answer with it: ``nan_policy='omit'`` drops them, as ``dropna()`` would."""
    names = _NAN_POLICY | (_NAN_POLICY_1_11 if _version(scipy) >= (1, 11) else frozenset())
    edits = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in names and call.args):
            continue
        owner = func.value
        from_stats = (isinstance(owner, ast.Name) and owner.id in ("stats", "st", "ss")) or (
            isinstance(owner, ast.Attribute) and owner.attr == "stats"
        )
        if not from_stats or any(k.arg in ("nan_policy", None) for k in call.keywords):
            continue
        end = span([*call.args, *(k.value for k in call.keywords)][-1])[1]
        edits.append(_Edit(end, end, ", nan_policy='omit'"))
    return edits


def _version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)[:2]
    return tuple(int(p) for p in parts) if parts else (0,)


# ------------------------------------------------------------------ a part of a date
_DATE_PARTS = {
    "year": "year",
    "month": "month",
    "day": "day",
    "weekday": "dayofweek",
    "dayofweek": "dayofweek",
    "quarter": "quarter",
    "hour": "hour",
}


def _date_part_edits(
    tree: ast.AST,
    code: str,
    facts: Mapping[str, FileFacts],
    namespace: Mapping[str, VariableInfo],
    earlier: Sequence[str],
    span: Span,
) -> list[_Edit]:
    """``df['Year']`` where no column is a year and the file has one date column: that
    column's year, parsed with its format (a KeyError the model repeats otherwise)."""
    dates = {(c, f) for file in facts.values() for c, f in file.dates.items()}
    module = _pandas_alias([code, *earlier])
    if len(dates) != 1 or module is None or _RENAMES.search(code):
        return []
    ((column, fmt),) = dates
    columns = {c for file in facts.values() for c in file.columns}
    known = columns | {c for v in namespace.values() for c in (v.columns or ())}
    for before in [code, *earlier]:
        parsed = parse_python(before)
        if parsed is not None:
            known |= _stored_strings(parsed).keys()
    if any(_key(k) in _DATE_PARTS for k in known):
        return []  # a column already holds one: the name is a misspelling, or it is made
    edits = []
    skip = _not_frames(tree, namespace)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in skip:
            continue
        key = node.slice
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        part = _DATE_PARTS.get(_key(key.value))
        if part is None:
            continue
        frame = ast.get_source_segment(code, node.value)
        if frame is None:
            continue
        edits.append(
            _Edit(
                *span(node),
                f"{module}.to_datetime({frame}[{column!r}], format={fmt!r}).dt.{part}",
            )
        )
    return edits


def _pandas_alias(cells: Sequence[str]) -> str | None:
    for cell in cells:
        match = re.search(r"^\s*import pandas as (\w+)\s*$", cell, re.MULTILINE)
        if match:
            return match.group(1)
    return None


# ------------------------------------------------------------------ numbers stored as text
_CONVERTS = re.compile(r"to_numeric|astype\s*\(|\.str\.replace|thousands\s*=|converters\s*=")


def _numbers_as_text_edits(
    tree: ast.Module, code: str, facts: Mapping[str, FileFacts], span: Span
) -> list[_Edit]:
    """After ``df = pd.read_csv(f)`` (a top-level line) of a file whose preview found
    numbers stored as text, the lines that read them as numbers; none in a cell that
    converts columns itself."""
    if _CONVERTS.search(code):
        return []
    edits = []
    for statement in tree.body:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute)
            and isinstance(statement.value.func.value, ast.Name)
        ):
            continue
        file = _read_file(statement.value, facts)
        if file is None or not file.numeric:
            continue
        frame, module = statement.targets[0].id, statement.value.func.value.id
        lines = [
            f"{frame}[{c!r}] = {module}.to_numeric({frame}[{c!r}].astype(str)"
            f".str.replace(r'[,$€£%\\s]', '', regex=True), errors='coerce')"
            for c in file.numeric
        ]
        end = span(statement)[1]
        edits.append(_Edit(end, end, "\n" + "\n".join(lines)))
    return edits


# ------------------------------------------------------------------ date formats
def _is_utf8(value: object) -> bool:
    return str(value).lower().replace("_", "-") in ("utf-8", "utf8")


def _date_format_edits(
    call: ast.Call, facts: Mapping[str, FileFacts], renames: Mapping[str, str], span: Span
) -> list[_Edit]:
    func = call.func
    name = (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )
    if name != "to_datetime" or not call.args or not isinstance(call.args[0], ast.Subscript):
        return []
    strings = _strings(call.args[0].slice)
    if len(strings) != 1:
        return []
    column = renames.get(str(strings[0].value), str(strings[0].value))
    formats = {f.dates[column] for f in facts.values() if column in f.dates}
    if len(formats) != 1:
        return []
    wanted = formats.pop()
    keywords = {k.arg: k for k in call.keywords if k.arg}
    given = keywords.get("format")
    if given is None:
        if keywords.keys() & {"dayfirst", "yearfirst", "infer_datetime_format"} or any(
            k.arg is None for k in call.keywords
        ):
            return []
        end = span([*call.args, *(k.value for k in call.keywords)][-1])[1]
        return [_Edit(end, end, f", format={wanted!r}")]
    value = given.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        if value.value != wanted and value.value not in ("mixed", "ISO8601"):
            return [_Edit(*span(value), repr(wanted))]
    return []


# ------------------------------------------------------------------ answer slots as code
def _slot_lines(code: str, namespace: Mapping[str, VariableInfo]) -> str:
    """A cell that cannot parse, with each ``@name[expr]`` line made a print of it."""
    if "@" not in code or parse_python(code) is not None:
        return code
    lines = code.split("\n")
    changed = False
    for i, line in enumerate(lines):
        match = _SLOT_LINE.match(line)
        if match is None:
            continue
        indent, name, inner = match["indent"], match["name"], match["inner"].strip()
        try:
            expr = ast.parse(inner, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            expr = None
        is_text = expr is None or (isinstance(expr, ast.Name) and expr.id not in namespace)
        if is_text:
            lines[i] = f"{indent}print({f'@{name}[{inner}]'!r})"
        else:
            lines[i] = f"{indent}print({f'@{name}['!r} + str({inner}) + ']')"
        changed = True
    fixed = "\n".join(lines)
    return fixed if changed and parse_python(fixed) is not None else code


class Preflight(Lever):
    """A cell gets the preview's column names, read call and date format before it runs."""

    name = "preflight"

    def rewrite(self, state: TaskState, code: str) -> tuple[str, str] | None:
        if not state.libraries:  # a Python kernel's preview only (it is probed there)
            return None
        fixed = preflight(
            code,
            state.data_facts,
            state.namespace,
            earlier=[c.code for c in state.cells],
            scipy=state.libraries.get("scipy", ""),
        )
        # no note, as auto_import gives none: a note is sent back as a cell by the small model
        return (fixed, "") if fixed != code else None
