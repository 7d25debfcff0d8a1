"""Calls held against the file: its read call, its date format, a part of its one date
column, its numbers stored as text, integer casts of columns with gaps, and missing values
in a scipy test."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ...kernel_state.preview_facts import parsed_dates
from ..code_text import converted_columns, parse_python
from .edits import (
    _READERS,
    WHITESPACE,
    Span,
    _added_arguments,
    _called,
    _Edit,
    _read_file,
    _strings,
)
from .names import _key, _not_frames, _stored_strings, renames_columns

if TYPE_CHECKING:
    from ...kernel_state.namespace import VariableInfo
    from ...kernel_state.preview_facts import FileFacts


def _read_call_edits(call: ast.Call, facts: Mapping[str, FileFacts], span: Span) -> list[_Edit]:
    file = _read_file(call, facts)
    if file is None:
        return []
    reader = _called(call)
    keywords = {k.arg: k for k in call.keywords if k.arg}
    edits: list[_Edit] = []
    added: list[str] = []
    sep_kw = keywords.get("sep") or keywords.get("delimiter")
    blank = keywords.get("delim_whitespace")
    if blank is not None and sep_kw is None and file.sep == WHITESPACE:
        # pandas 3 removed delim_whitespace (a TypeError); sep=r'\s+' is what it meant
        edits.append(_Edit(*span(blank), f"sep={_sep_text(file.sep)}"))
    elif sep_kw is None:
        if file.sep != _READERS[reader]:
            added.append(f"sep={_sep_text(file.sep)}")
    elif isinstance(sep_kw.value, ast.Constant) and isinstance(sep_kw.value.value, str):
        if sep_kw.value.value != file.sep and not sep_kw.value.value.startswith(r"\s"):
            edits.append(_Edit(*span(sep_kw.value), _sep_text(file.sep)))
    if not _is_utf8(file.encoding):
        enc = keywords.get("encoding")
        if enc is None:
            added.append(f"encoding={file.encoding!r}")
        elif isinstance(enc.value, ast.Constant) and _is_utf8(enc.value.value):
            edits.append(_Edit(*span(enc.value), repr(file.encoding)))
    if file.decimal_comma and "decimal" not in keywords:
        added.append("decimal=','")
    if file.skiprows and "skiprows" not in keywords and _header_line(keywords) in (0, None):
        added.append(f"skiprows={file.skiprows}")  # the title above the header
    if file.spaced and "skipinitialspace" not in keywords:
        added.append("skipinitialspace=True")  # 'a, b': names and values without the blank
    if file.skipfooter and not {"skipfooter", "nrows", "engine", "low_memory"} & set(keywords):
        added.append(f"skipfooter={file.skipfooter}, engine='python'")  # the note below
    if file.headerless and not {"header", "names"} & set(keywords):
        added.append("header=None")  # the first line is a row, not names
    if file.kept is not None and not {"na_values", "keep_default_na"} & set(keywords):
        marks = [*file.kept, *sorted({m for ms in file.missing.values() for m in ms})]
        added.append(f"keep_default_na=False, na_values={marks!r}")  # 'NA' is a code here
    elif file.missing and file.delimited and not {"na_values", "keep_default_na"} & set(keywords):
        added.append(f"na_values={ {c: list(m) for c, m in file.missing.items()}!r}")
    edits += _header_kept(keywords, file, span)
    if added and not any(k.arg is None for k in call.keywords):  # no **kwargs to clash with
        edits.append(_added_arguments(call, span, ", ".join(added)))
    return edits


def _header_line(keywords: Mapping[str, ast.keyword]) -> object:
    """The ``header=`` a read call gives as a constant (0 when none; ``...`` for another
    expression): which line, counted after any skipped, holds the names."""
    header = keywords.get("header")
    if header is None:
        return 0
    return header.value.value if isinstance(header.value, ast.Constant) else ...


def _sep_text(sep: str) -> str:
    """``sep`` as code: a raw string for the whitespace pattern (``r'\\s+'``)."""
    return "r'\\s+'" if sep == WHITESPACE else repr(sep)


def _header_kept(keywords: Mapping[str, ast.keyword], file: FileFacts, span: Span) -> list[_Edit]:
    """``names=[...]`` with a name for each of the file's columns, and ``header=None`` or no
    header (which pandas then reads as None): the file has a header line (the preview read
    its names from it), read so as a row of data (a count one too high, text in number
    columns); ``header=0`` replaces it with those names."""
    header, names = keywords.get("header"), keywords.get("names")
    if file.headerless or names is None or not isinstance(names.value, ast.List | ast.Tuple):
        return []
    if not file.columns or len(names.value.elts) != len(file.columns):
        return []
    if header is None:  # names alone read as header=None does
        end = span(names.value)[1]
        return [_Edit(end, end, ", header=0")]
    if not (isinstance(header.value, ast.Constant) and header.value.value is None):
        return []
    return [_Edit(*span(header.value), "0")]


def _is_utf8(value: object) -> bool:
    return str(value).lower().replace("_", "-") in ("utf-8", "utf8")


# ------------------------------------------------------------------ date formats
def _date_format_edits(
    call: ast.Call, facts: Mapping[str, FileFacts], renames: Mapping[str, str], span: Span
) -> list[_Edit]:
    name = _called(call)
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
    if wanted == "%s":  # seconds since 1970: every row fell on 1970-01-01 read as ns
        if given is None and not keywords.keys() & {"unit", "origin"}:
            return [_added_arguments(call, span, "unit='s'")]
        return []
    # 20190314 read as a number is 20190314 ns after 1970 unless it is text first
    as_text = [_Edit(*span(call.args[0]), f"{ast.unparse(call.args[0])}.astype(str)")]
    if wanted != "%Y%m%d" or keywords.keys() & {"unit", "origin"}:
        as_text = []
    if given is None:
        if keywords.keys() & {"dayfirst", "yearfirst", "infer_datetime_format", "unit"} or any(
            k.arg is None for k in call.keywords
        ):
            return []
        return [*as_text, _added_arguments(call, span, f"format={wanted!r}")]
    value = given.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        if value.value != wanted and value.value not in ("mixed", "ISO8601"):
            return [*as_text, _Edit(*span(value), repr(wanted))]
        return as_text if value.value == wanted else []
    return []


# ------------------------------------------------------------------ a part of a date
_DATE_PARTS = {
    "year": "year",
    "month": "month",
    "day": "day",
    "weekday": "day_of_week",
    "dayofweek": "day_of_week",
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
    """``df['Year']`` (or ``df.groupby('month')``) where no column is a year and the file
    has one date column: that column's year, parsed with its format (a KeyError the
    model repeats otherwise)."""
    dates = {(c, f) for file in facts.values() for c, f in file.dates.items()}
    module = _pandas_alias([code, *earlier])
    if len(dates) != 1 or module is None or renames_columns(code):
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
        if isinstance(node, ast.Call) and _called(node) == "groupby" and node.args:
            # df.groupby('month'): by the date column's month
            receiver = ast.get_source_segment(code, node.func.value)  # type: ignore[attr-defined]
            for arg in _strings(node.args[0]):
                part = _DATE_PARTS.get(_key(str(arg.value)))
                if part is not None and receiver is not None:
                    when = parsed_dates(module, f"{receiver}[{column!r}]", fmt)
                    edits.append(_Edit(*span(arg), f"{when}.dt.{part}.rename({arg.value!r})"))
            continue
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
                f"{parsed_dates(module, f'{frame}[{column!r}]', fmt)}.dt.{part}",
            )
        )
    return edits


def _pandas_alias(cells: Sequence[str]) -> str | None:
    for cell in cells:
        match = re.search(r"^\s*import pandas as (\w+)\s*$", cell, re.MULTILINE)
        if match:
            return match.group(1)
    return None


# ---------------------------------------------- after the read: a totals row, numbers as text
#: a read that converts the numbers itself
_READ_CONVERTS = re.compile(r"thousands\s*=|converters\s*=")


def _after_read_edits(
    tree: ast.Module, code: str, facts: Mapping[str, FileFacts], span: Span
) -> list[_Edit]:
    """After ``df = pd.read_csv(f)`` (a top-level line) of a file whose preview found
    numbers stored as text, the lines that read them as numbers: each column but those
    the cell converts itself (the held-out cars93 run converted Cylinders and divided
    EngineSize's '1.8 L' text, four times); none when its read converts them. First, for
    a file whose last row holds the totals of the rows above, the line that drops that
    row by its label, unless the code names the label (a scratch export's 'Total' row
    doubled the mean sales, with the preview's line ignored)."""
    converts = bool(_READ_CONVERTS.search(code))
    own = converted_columns(tree)
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
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
        if file is None:
            continue
        numeric = [] if converts else [c for c in file.numeric if c not in own]
        units = [] if converts or file.decimal_comma else [c for c in file.units if c not in own]
        total = file.total if file.total and file.total[1] not in constants else None
        if not (numeric or units or total):
            continue
        frame, module = statement.targets[0].id, statement.value.func.value.id
        digits = (
            ".str.replace(r'[.$€£%+\\s]', '', regex=True).str.replace(',', '.')"
            if file.decimal_comma
            else ".str.replace(r'[,$€£%+\\s]', '', regex=True)"
        )
        lines = [
            f"{frame}[{c!r}] = {module}.to_numeric({frame}[{c!r}].astype(str){digits}, "
            "errors='coerce')"
            for c in numeric
        ] + [
            f"{frame}[{c!r}] = {module}.to_numeric({frame}[{c!r}].astype(str)"
            f".str.extract(r'^\\s*(-?\\d+\\.?\\d*)')[0], errors='coerce')"
            for c in units
        ]
        if total:  # the export's totals line is not a record: drop it by its label
            lines.insert(0, f"{frame} = {frame}[{frame}[{total[0]!r}] != {total[1]!r}]")
        end = span(statement)[1]
        edits.append(_Edit(end, end, "\n" + "\n".join(lines)))
    return edits


# ------------------------------------------------------------------ lists written as text
#: a list written as text read as the list, a record by its name ("[{'name': 'Drama'}]")
_READ_LIST = (
    "lambda s: [d.get('name', d) if isinstance(d, dict) else d for d in ast.literal_eval(s)] "
    "if isinstance(s, str) else s"
)


def _explode_edits(
    tree: ast.Module, code: str, facts: Mapping[str, FileFacts], span: Span
) -> list[_Edit]:
    """``df.explode('genres')`` of a column of lists written as text explodes nothing (a
    text is one item, and no row then equals 'Drama'): the lists are read first, a list
    of records by each one's name, and ``import ast`` is added. The scratch TMDB run
    (2026-12-07) copied the preview's explode without its literal_eval and printed nan."""
    listed = {c for f in facts.values() for c in f.lists}
    if not listed or "literal_eval" in code or "json.loads" in code:
        return []
    edits = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if not (
            _called(call) == "explode"
            and isinstance(call.func, ast.Attribute)
            and isinstance(frame := call.func.value, ast.Name)
            and len(call.args) == 1
            and isinstance(column := call.args[0], ast.Constant)
            and column.value in listed
        ):
            continue
        name, key = frame.id, repr(column.value)
        edits.append(
            _Edit(*span(frame), f"{name}.assign(**{{{key}: {name}[{key}].map({_READ_LIST})}})")
        )
    if edits and not re.search(r"^import ast\b", code, re.M):
        edits.append(_Edit(0, 0, "import ast\n"))
    return edits


# ------------------------------------------------------------------ integer casts
_INT_DTYPES = frozenset({"int", "int8", "int16", "int32", "int64"})


def _int_cast_edits(
    tree: ast.AST, facts: Mapping[str, FileFacts], renames: Mapping[str, str], span: Span
) -> list[_Edit]:
    """``df['x'].astype(int)`` of a column of whole numbers with missing values raises
    (``IntCastingNaNError``): ``'Int64'`` holds them and their gaps (it reads as floats
    with ``nan`` where numpy or scipy take it). A cast after ``dropna``/``fillna`` stays."""
    whole = {c for f in facts.values() for c in f.whole}
    edits = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if _called(call) != "astype" or not isinstance(call.func, ast.Attribute):
            continue
        dtype = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if dtype is None or _dtype_name(dtype) not in _INT_DTYPES:
            continue
        receiver = call.func.value
        inner = [n for n in ast.walk(receiver) if isinstance(n, ast.Call)]
        if any(_called(c) in ("dropna", "fillna") for c in inner):
            continue
        named = {
            renames.get(str(c.value), str(c.value))
            for n in ast.walk(receiver)
            if isinstance(n, ast.Subscript)
            for c in _strings(n.slice)
        } | {n.attr for n in ast.walk(receiver) if isinstance(n, ast.Attribute)}
        if named & whole:
            edits.append(_Edit(*span(dtype), "'Int64'"))
    return edits


def _dtype_name(node: ast.expr) -> str:
    """``int``, ``'int64'``, ``np.int32``... as the name written ("" for anything else)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


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
        edits.append(_added_arguments(call, span, "nan_policy='omit'"))
    return edits


def _version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)[:2]
    return tuple(int(p) for p in parts) if parts else (0,)


# ------------------------------------------------------------------ in place on a column
#: methods whose ``inplace=True`` on a selected column changes nothing under pandas 3's
#: copy-on-write (``ChainedAssignmentError`` is only a warning)
_INPLACE = frozenset(
    {"fillna", "replace", "clip", "where", "mask", "interpolate", "ffill", "bfill", "dropna"}
)


def _inplace_column_edits(tree: ast.AST, span: Span) -> list[_Edit]:
    """``df['Age'].fillna(m, inplace=True)`` as a statement leaves ``df`` as it was in
    pandas 3 (the scratch titanic run's mean age came out of the unfilled column): it is
    written ``df['Age'] = df['Age'].fillna(m)``, what it meant."""
    edits = []
    for statement in (n for n in ast.walk(tree) if isinstance(n, ast.Expr)):
        call = statement.value
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in _INPLACE
            and isinstance(call.func.value, ast.Subscript)
        ):
            continue
        inplace = [k for k in call.keywords if k.arg == "inplace"]
        if len(inplace) != 1 or not (
            isinstance(inplace[0].value, ast.Constant) and inplace[0].value.value is True
        ):
            continue
        column = call.func.value
        kept = ast.Call(
            func=call.func,
            args=call.args,
            keywords=[k for k in call.keywords if k is not inplace[0]],
        )
        edits.append(_Edit(*span(statement), f"{ast.unparse(column)} = {ast.unparse(kept)}"))
    return edits


# ------------------------------------------------------------------ pairs with gaps
#: scipy functions of two paired columns that take no ``nan_policy`` and give ``nan``
#: when either has a missing value
_PAIRED = frozenset({"pearsonr", "linregress", "pointbiserialr"})


def _paired_gaps_edits(tree: ast.AST, span: Span) -> list[_Edit]:
    """``stats.pearsonr(df['Fare'], df['Age'])`` is ``nan`` when either column has a gap
    (the scratch titanic and hotel runs answered nan, or a guess): the pairs with both
    values are kept, ``stats.pearsonr(*df[['Fare', 'Age']].dropna().to_numpy().T)``, which
    is the same where there is no gap."""
    edits = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if _called(call) not in _PAIRED or len(call.args) != 2 or call.keywords:
            continue
        pairs = [pair for arg in call.args if (pair := _frame_column(arg)) is not None]
        frames = {frame for frame, _ in pairs}
        names = [column for _, column in pairs]
        if len(pairs) != 2 or len(frames) != 1 or len(set(names)) != 2:
            continue
        frame = frames.pop()
        start, end = span(call.args[0])[0], span(call.args[1])[1]
        edits.append(_Edit(start, end, f"*{frame}[{names!r}].dropna().to_numpy().T"))
    return edits


def _frame_column(node: ast.expr) -> tuple[str, str] | None:
    """``(frame, column)`` of ``frame['column']`` (a plain name and a string)."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.value.id, node.slice.value
    return None
