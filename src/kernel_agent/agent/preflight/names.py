"""Names as the file has them: a column written otherwise, and a text value in a filter."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..code_text import parse_python
from .edits import Span, _called, _Edit, _read_file, _strings

if TYPE_CHECKING:
    from ...kernel_state.namespace import VariableInfo
    from ...kernel_state.preview_facts import FileFacts

#: methods whose string arguments (and list-of-string arguments) name columns
_COLUMN_METHODS = frozenset(
    "groupby sort_values set_index dropna drop_duplicates nlargest nsmallest pivot_table "
    "pivot melt value_counts duplicated".split()
)
#: keywords whose string (or list-of-string) value names columns, in any call
_COLUMN_KEYWORDS = frozenset(
    "by subset on left_on right_on index values x y hue id_vars value_vars column".split()
)


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
#: the one rename the preview itself advises for names with a space at an end
STRIP_NAMES = re.compile(
    r"^[ \t]*(\w+)\.columns\s*=\s*\1\.columns\.str\.strip\(\)[ \t]*(?:#.*)?$", re.M
)


def renames_columns(code: str) -> bool:
    """The code may rename columns, other than by the strip the preview advises."""
    return _RENAMES.search(STRIP_NAMES.sub("", code)) is not None


def _column_fixes(
    tree: ast.AST,
    code: str,
    facts: Mapping[str, FileFacts],
    namespace: Mapping[str, VariableInfo] | None,
    earlier: Sequence[str],
) -> list[tuple[str, str]]:
    """(written, meant) for each column name to correct; none when names may have changed."""
    if any(renames_columns(c) for c in (code, *earlier)):
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


# ------------------------------------------------------------------ values in filters
def _value_edits(
    tree: ast.AST, facts: Mapping[str, FileFacts], renames: Mapping[str, str], span: Span
) -> list[_Edit]:
    """``df[c] == 'Adelie'`` where no value of ``c`` is 'Adelie' and exactly one is but for
    case and spaces, or starts with it ('Adelie Penguin (Pygoscelis adeliae)'), or with what
    comes before a '...' (the preview's rows cut long values so: 'Adelie Penguin (Pygo...)'):
    that one."""
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


#: pandas cuts a long value to 'Adelie Penguin (Pygo...'; the model may close its bracket
_CUT = re.compile(r"(.*?)(?:\.\.\.|…)[)\]}\s]*", re.S)


def _value_match(literal: str, values: set[str]) -> str | None:
    if not values or literal in values or not literal.strip():
        return None
    shown_cut = _CUT.fullmatch(literal)  # a value the preview's rows cut short, as shown
    if shown_cut and shown_cut.group(1).strip():
        head = shown_cut.group(1).casefold()
        cut = {v for v in values if v.casefold().startswith(head)}
        return cut.pop() if len(cut) == 1 else None
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
