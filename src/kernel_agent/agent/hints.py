"""Short hints appended to an error the model must fix: the mistakes small models repeat.

Pure: built from the error, the cell's code and the namespace summary.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import ParamSpec

from ..kernel_state.namespace import VariableInfo
from ..results import CellError, CellResult
from .code_text import converted_columns, parse_python
from .explode_hints import reindexed_hint
from .imports import COMMON_ALIASES
from .label_hints import labelled_lookup, labels_averaged, quoted_number, years_as_columns
from .precedence import precedence_slip
from .slots import CODE_LINE, OPENING

__all__ = ["MAX_HINT_CHARS", "error_hint"]

P = ParamSpec("P")

_COMMON_IMPORTS = {
    **{alias: line for alias, (line, _) in COMMON_ALIASES.items()},
    "os": "import os",
    "random": "import random",
    "datetime": "import datetime",
}
#: what a function that small models unpack wrongly returns, in order
_RETURNS = {
    "chi2_contingency": "4 values: chi2, p, dof, expected",
    "linregress": "5 values: slope, intercept, rvalue, pvalue, stderr",
    "pearsonr": "2 values: statistic, pvalue",
    "spearmanr": "2 values: statistic, pvalue",
    "kendalltau": "2 values: statistic, pvalue",
    "ttest_ind": "2 values: statistic, pvalue",
    "ttest_rel": "2 values: statistic, pvalue",
    "ttest_1samp": "2 values: statistic, pvalue",
    "f_oneway": "2 values: statistic, pvalue",
    "kruskal": "2 values: statistic, pvalue",
    "mannwhitneyu": "2 values: statistic, pvalue",
    "shapiro": "2 values: statistic, pvalue",
    "levene": "2 values: statistic, pvalue",
    "chisquare": "2 values: statistic, pvalue",
    "polyfit": "one value per coefficient, the highest power first (deg=1: slope, intercept)",
}
_UNPACK = re.compile(r"(?:too many|not enough) values to unpack")
_ONE_VALUE = re.compile(r"cannot unpack non-iterable (\w+) object")
_NAME_ERROR = re.compile(r"name '([A-Za-z_]\w*)' is not defined")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


def _squash(name: str) -> str:
    """A column name without case, spaces and punctuation: ``row_mz`` is ``row m/z``."""
    return re.sub(r"[\W_]+", "", str(name)).lower()


def _one_value(kind: str, code: str) -> str:
    """``r, p = s.corr(t)``: the call returns one value, which cannot be unpacked."""
    hint = (
        f"Hint: the right side of an `a, b = ...` line in this cell is one {kind} value, not "
        "a pair; assign it to one name."
    )
    if re.search(r"\.corr\s*\(", code):
        hint += (
            " `a.corr(b)` returns only the coefficient; `stats.pearsonr(a, b)` (or "
            "`stats.spearmanr`) returns the statistic and the p-value."
        )
    return hint


#: the most characters of a hint: it quotes the kernel's error text, names and columns
MAX_HINT_CHARS = 2000


def _bounded(hint_of: Callable[P, str]) -> Callable[P, str]:
    """``hint_of``'s hint cut at :data:`MAX_HINT_CHARS`, whatever the kernel sent."""

    @functools.wraps(hint_of)
    def bounded(*args: P.args, **kwargs: P.kwargs) -> str:
        hint = hint_of(*args, **kwargs)
        return hint if len(hint) <= MAX_HINT_CHARS else hint[: MAX_HINT_CHARS - 1] + "…"

    return bounded


@_bounded
def error_hint(
    result: CellResult,
    namespace: dict[str, VariableInfo],
    libraries: Mapping[str, str] | None = None,
    install_policy: str = "never",
    told: Sequence[str] = (),
    before: Mapping[str, VariableInfo] | None = None,
    earlier: Sequence[str] = (),
) -> str:
    """A hint for the model, or "" when there is nothing useful to add (at most
    :data:`MAX_HINT_CHARS` long: it quotes the kernel's text).

    ``libraries`` is what the kernel can import (``{import name: version}``), when known;
    ``told``: what the model was told in this task (the data preview's ``read it with``
    and ``!`` lines are quoted from it when the error is about the file's shape);
    ``before``: the kernel's variables before the cell ran, and ``earlier``: the code of
    the cells before it (a column an earlier cell added that this cell's new read of the
    file dropped, and the line that made it).
    """
    error = result.error
    if error is None or result.status != "error":
        return ""
    if error.ename == "SyntaxError" and OPENING.search(result.code):
        return _slot_as_code(result.code)
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
    if error.ename == "ValueError" and _UNPACK.search(error.evalue):
        called = [f for f in _RETURNS if re.search(rf"\b{f}\s*\(", result.code)]
        if called:
            return (
                f"Hint: {called[0]}() returns {_RETURNS[called[0]]}. Unpack exactly that many "
                "names, or keep the result in one name and take its parts by index."
            )
    if error.ename == "TypeError" and (match := _ONE_VALUE.search(error.evalue)):
        return _one_value(match.group(1), result.code)
    if _MASKS_COMBINED.search(error.evalue) and (masks := _masks_combined(error, result.code)):
        return masks
    if error.ename == "ValueError" and (exploded := reindexed_hint(error.evalue, result.code)):
        return exploded
    if error.ename == "KeyError" and (
        reread := _reread_dropped(
            error.evalue.strip().strip("'\""), result.code, before or {}, earlier
        )
    ):
        return reread
    if data_hint := _data_shape_hint(error.ename, error.evalue, result.code, "\n".join(told)):
        return data_hint
    if error.ename == "KeyError":
        frames = [v for v in namespace.values() if v.columns]
        key = error.evalue.strip().strip("'\"")
        if one_column := _one_column(frames):
            return one_column + _read_line(result.code, told)
        if wide := years_as_columns(key, namespace):
            return wide
        if lost := _read_lost_column(key, result.code, "\n".join(told)):
            return lost
        if re.fullmatch(r"-?\d+", key) and (
            labelled := labelled_lookup(key, result.code, namespace)
            or quoted_number(error.evalue, namespace)
        ):
            return labelled
        if frames and re.fullmatch(r"-?\d+", key):
            return (
                f"Hint: `frame[{key}]` looks up a column, and there is no column {key}. "
                f"A row by its index label is `frame.loc[{key}]`, by its position "
                f"`frame.iloc[{key}]`; one value of it is `frame.loc[{key}, 'column']`."
            )
        for frame in frames:
            close = _close_columns(key, list(frame.columns or ()))
            if close:
                others = f" (or {', '.join(map(repr, close[1:]))})" if len(close) > 1 else ""
                return (
                    f"Hint: there is no column {key!r}, "
                    f"but {frame.name} has a column {close[0]!r}{others}. "
                    f"Use {frame.name}[{close[0]!r}], spelt exactly so: spaces, dots and "
                    "case included." + _more_misspelt(result.code, key, frame)
                )
        if frames:
            listed = "; ".join(
                f"{v.name} has columns {', '.join(v.columns or ())}" for v in frames[:3]
            )
            return f"Hint: {listed}. Column names are case-sensitive."
    if (
        error.ename == "TypeError"
        and "bad operand type for abs(): 'str'" in error.evalue
        and re.search(r"\b(?:max|min|sorted)\s*\(.*\bkey\s*=\s*abs\b", result.code)
    ):
        return (
            "Hint: max()/min()/sorted() over a dict go through its keys, which are strings. "
            "To pick the key whose value is largest in absolute value: "
            "`max(d, key=lambda k: abs(d[k]))`."
        )
    if error.ename == "TypeError" and "passed to Series.__format__" in error.evalue:
        return (
            "Hint: a value formatted in the f-string is a Series (one value per row), not a "
            "number. Take its number out first: `x.iloc[0]` for its first row, or `x.item()` "
            "when it has exactly one."
        )
    if (
        error.ename == "AttributeError"
        and re.search(r"'(?:int|numpy\.int\d*|int\d+)' object has no attribute", error.evalue)
        and re.search(r"\.(?:idxmax|idxmin|argmax|argmin)\s*\(", result.code)
    ):
        return (
            "Hint: idxmax()/idxmin() give the row's index label, here a row number, not the "
            "row's date or name. Look the row up by it: "
            "`df.loc[df['x'].idxmax(), 'date']` is the date of the row where x is largest."
        )
    if error.ename == "TypeError" and "keyword argument 'delim_whitespace'" in error.evalue:
        return (
            "Hint: this pandas has no delim_whitespace (removed in pandas 3). Fields "
            "separated by runs of blanks are read with sep=r'\\s+'."
        )
    if error.ename == "MemoryError":
        return (
            "Hint: the cell built more items than memory holds. Count or sum them without "
            "listing each one: a formula (math.factorial, math.comb), a generator, or a loop "
            "that keeps only a running total."
        )
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
    if close := _close_names(name, code, namespace):
        return (
            f"Hint: no variable `{name}` exists, but `{close}` does (one spelling apart): "
            f"write `{close}` wherever the cell says `{name}`, and send the cell again."
        )
    existing = ", ".join(sorted(namespace)[:20]) or "none yet"
    return f"Hint: no variable `{name}` exists in the kernel. Variables that exist: {existing}."


def _close_names(name: str, code: str, namespace: dict[str, VariableInfo]) -> str:
    """The one name the kernel has, or the cell assigns, that ``name`` is a misspelling of."""
    if len(name) > 100:  # the error's text is the kernel's: a name no cell would write
        return ""
    known = set(namespace)
    if (tree := parse_python(code)) is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                known.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                known.add(node.name)
            elif isinstance(node, ast.alias):
                known.add((node.asname or node.name).split(".")[0])
    known.discard(name)
    close = difflib.get_close_matches(name, sorted(known), n=2, cutoff=0.8)
    return close[0] if len(close) == 1 or (close and _squash(close[0]) == _squash(name)) else ""


def _slot_as_code(code: str) -> str:
    """A line ``@name[expr]`` (the answer's form written as code): the print that works."""
    match = CODE_LINE.search(code)
    if match is None:
        return (
            "Hint: `@name[value]` is not Python. In code it goes only inside print(): "
            'print(f"@name[{value}]"); fix that line and run the cell again.'
        )
    name, expr = match["name"], match["inner"].strip()
    quote = '"' if '"' not in expr else "'"
    line = f"print(f{quote}@{name}[{{{expr}}}]{quote})"
    return (
        f"Hint: the line `{match.group(0).strip()}` is not Python (it reads as a decorator). "
        f"Print it instead: `{line}`; send the cell again with that line changed."
    )


_SEPARATORS = {";": ";", "\t": "\\t", "|": "|"}


def _one_column(frames: Sequence[VariableInfo]) -> str:
    """A frame read with the wrong separator: one column whose name holds the others."""
    for frame in frames:
        columns = frame.columns or ()
        if len(columns) != 1:
            continue
        for sep, shown in _SEPARATORS.items():
            if sep in columns[0]:
                return (
                    f"Hint: {frame.name} has one column, {columns[0][:60]!r}: the file is "
                    f"separated by {shown!r}, not by commas. Read it again with "
                    f"sep={shown!r}."
                )
    return ""


#: a mask asked for one truth value, or ``&``/``|`` between a mask and a number or a method
_MASKS_COMBINED = re.compile(
    r"truth value of an? \w+ is ambiguous|Cannot perform 'r?(?:and|or|xor)_'|"
    r"unsupported operand type\(s\) for [&|^]"
)
_EMPTY = re.compile(
    r"Encountered all NA values|(?:arg|argmax|argmin|max|min)\w* (?:of )?an empty sequence|"
    r"zero-size array|attempt to get arg\w+ of an empty sequence"
)
_DATE_ERROR = re.compile(
    r"time data .* doesn't match format|does not match format|Unknown datetime string format|"
    r"unconverted data remains|day is out of range for month|month must be in 1\.\.12"
)
_READ_LINE = re.compile(r"read it with: df = (pd\.read_csv\((['\"])(.+?)\2.*\))")
_SHAPE_LINE = re.compile(r"^\s*! (.+)$", re.M)
_NOT_NUMBER = re.compile(
    r"could not convert string to float|Unable to parse string|Could not convert .* to "
    r"numeric|unsupported operand type\(s\) for .*'str'|can only concatenate str|"
    r"ufunc '\w+' not supported for the input types|not supported between instances of "
    r"'str' and '(?:int|float)'|dtype\('O'\)|cannot perform reduce with flexible type|"
    r"agg function failed \[how->\w+,dtype->(?:object|str)\]|"
    r"operation '\w+' not supported for dtype 'str'|"
    r"Cannot perform reduction '\w+' with (?:string|str|object) dtype"
)


#: what each ``read_*`` option does to the columns the file has
_COLUMN_OPTIONS = {
    "skiprows": "skipped the header line, so a row of data became the column names",
    "header": "took another line than the header for the column names",
    "names": "gave the columns other names",
    "usecols": "kept only some columns",
    "index_col": "made it the index, which is not a column",
}


def _read_lost_column(key: str, code: str, told: str) -> str:
    """A column the preview lists for a file, lost by an option of the cell's read of it."""
    tree = parse_python(code)
    if tree is None or not key or f"'{key}'" not in told and f'"{key}"' not in told:
        return ""
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("read_")
            and node.args
            and isinstance(path := node.args[0], ast.Constant)
            and isinstance(path.value, str)
        ):
            continue
        options = [k for k in node.keywords if k.arg in _COLUMN_OPTIONS]
        if not options:
            continue
        kept = [k for k in node.keywords if k.arg not in _COLUMN_OPTIONS]
        plain = ast.unparse(ast.Call(node.func, [path], kept))
        told_read = [call for name, call in _told_reads([told]) if name == path.value]
        read = f"df = {told_read[0] if told_read else plain}"
        what = _COLUMN_OPTIONS[options[0].arg or ""]
        return (
            f"Hint: {path.value[:80]} has a column {key[:80]!r} (the data preview lists it), but "
            f"`{options[0].arg}=` in `{ast.unparse(node)[:120]}` {what}. Read it as the "
            f"preview did, `{read}`, and the column is there."
        )
    return ""


def _read_line(code: str, told: Sequence[str]) -> str:
    """The preview's tested ``pd.read_csv(...)`` for a file the code names (or the only one)."""
    found = _told_reads(told)
    named = [call for name, call in found if name in code] or (
        [found[0][1]] if len(found) == 1 else []
    )
    return f" The data preview read it so: `df = {named[0]}`." if named else ""


def _told_reads(told: Sequence[str]) -> list[tuple[str, str]]:
    """The preview's ``read it with`` calls, as (file name, ``pd.read_csv(...)``)."""
    return [(m.group(3), m.group(1)) for t in told for m in _READ_LINE.finditer(t)]


def _data_shape_hint(ename: str, evalue: str, code: str, told: str) -> str:
    """Errors from the data's shape: the separator, the encoding, text for numbers, NaN."""
    if ename == "ParserError" or (
        ename == "ValueError" and "Expected" in evalue and "fields" in evalue
    ):
        return (
            "Hint: the file's rows do not split on commas: it is separated by another "
            "character (tab, ';' or '|'). Pass sep=..." + _read_line(code, [told])
        )
    if ename == "UnicodeDecodeError":
        return (
            "Hint: the file is not utf-8 text: pass encoding='latin-1' to pd.read_csv."
            + _read_line(code, [told])
        )
    if ename in ("ValueError", "DateParseError") and _DATE_ERROR.search(evalue):
        flagged = [line for line in _SHAPE_LINE.findall(told) if "dates as text" in line]
        named = [line for line in flagged if _names_a_column(line, code)] or flagged[:1]
        if named:
            return "Hint: parse the dates with their own format. The data preview said: " + named[0]
        return (
            "Hint: the dates are written in another form than the one parsed (day first, "
            "13/01/2012?): pass the format that fits them, pd.to_datetime(s, format='%d/%m/%Y'), "
            "or dayfirst=True."
        )
    if ename == "IntCastingNaNError" or "non-finite values (NA or inf) to integer" in evalue:
        return (
            "Hint: the column has missing values, and an int cannot hold NaN. Drop them "
            "first (`s.dropna().astype(int)`) or use `.astype('Int64')`."
        )
    if ename in ("TypeError", "ValueError", "AttributeError") and _NOT_NUMBER.search(evalue):
        if labels := labels_averaged(code, told):
            return labels
        flagged = [line for line in _SHAPE_LINE.findall(told) if _names_a_column(line, code)]
        tree = parse_python(code)
        converted = converted_columns(tree) if tree is not None else set()
        flagged.sort(key=lambda line: _left_as_text(line, converted, evalue))
        if flagged:
            return "Hint: the column is text, not numbers. The data preview said: " + flagged[0]
        return (
            "Hint: a column used here holds text, not numbers (object dtype). Convert it "
            "first: `df[c] = pd.to_numeric(df[c].astype(str).str.replace(',', ''), "
            "errors='coerce')`; numbers with units or ranges: "
            "`df[c].astype(str).str.extract(r'(-?\\d+\\.?\\d*)')[0].astype(float)`. "
            "A category for a model: `pd.get_dummies`."
        )
    if ename == "ValueError" and _EMPTY.search(evalue) and _selections_combined(code):
        return (
            "Hint: `a[mask1] - a[mask2]` pairs rows by their index, and two selections of "
            "different rows share none, so every value is NaN. Put the values side by side "
            "by a key first: `w = df.pivot_table(index='key', columns='year', values='x')`, "
            "then `w[2007] - w[1952]`."
        )
    if ename == "ValueError" and _EMPTY.search(evalue):
        return (
            "Hint: the values are all NaN or there are none: a step before emptied them (a "
            "filter on a value spelt otherwise, a groupby by the wrong key, pct_change or "
            "diff within one-row groups). Print len() and .head() of each step, and fix it."
        )
    if ename == "AttributeError" and "Can only use .dt accessor" in evalue:
        dated = [line for line in _SHAPE_LINE.findall(told) if "dates as text" in line]
        named = [line for line in dated if _names_a_column(line, code)] or dated[:1]
        return "Hint: that column holds dates as text: parse it with pd.to_datetime first" + (
            ". The data preview said: " + named[0] if named else ", then use .dt."
        )
    if ename == "AttributeError" and "Can only use .str accessor" in evalue:
        return "Hint: that column is already numeric: drop the `.str` step and use it as it is."
    return ""


def _masks_combined(error: CellError, code: str) -> str:
    """Conditions joined against Python's precedence (``a > 1 & b < 2``, ``and``), or a
    mask asked for one truth value."""
    if slip := precedence_slip(code):
        return f"Hint: {slip.sentence()}"
    if "ambiguous" not in error.evalue:
        return ""
    return (
        "Hint: a condition on a column is a True/False Series, not one True or False. "
        "Combine conditions with `&` and `|`, each in parentheses: "
        "`df[(df.a > 1) & (df.b < 2)]`; for one value ask `.any()` or `.all()`."
    )


def _selections_combined(code: str) -> bool:
    """The code adds, subtracts, multiplies or divides two selections by a condition
    (``s[s.year == 2007] - s[s.year == 1952]``, ``.loc`` too), which align on the index."""
    tree = parse_python(code)
    if tree is None:
        return False

    def condition(index: ast.expr) -> bool:
        first = index.elts[0] if isinstance(index, ast.Tuple) and index.elts else index
        return isinstance(first, ast.Compare | ast.BinOp)

    def selected(node: ast.expr) -> bool:
        while isinstance(node, ast.Attribute | ast.Subscript):
            if isinstance(node, ast.Attribute) and node.attr in ("values", "array"):
                return False  # numpy: paired by position
            if isinstance(node, ast.Subscript) and condition(node.slice):
                return True
            node = node.value
        return False

    return any(
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Sub | ast.Add | ast.Div | ast.Mult)
        and selected(node.left)
        and selected(node.right)
        for node in ast.walk(tree)
    )


def _left_as_text(line: str, converted: set[str], evalue: str) -> int:
    """How surely a preview ``!`` line names the column an error is about: 0 when the
    error quotes one of its example values ('1.8 L'), 1 when the cell does not convert its
    column itself, 2 when it does (``converted``, the cell's :func:`converted_columns`: the
    held-out cars93 run was told of the column it had converted, not of the one it
    divided)."""
    examples = re.findall(r"'([^']{1,30})'", line.split("(", 1)[-1].split(")", 1)[0])
    if any(f"'{e}'" in evalue for e in examples):
        return 0
    match = re.match(r"'((?:[^'\\]|\\.)*)'", line)
    return 2 if match and match.group(1) in converted else 1


_READS = re.compile(
    r"^\s*([A-Za-z_]\w*)\s*=\s*\w+\.read_(?:csv|table|excel|json|parquet|fwf)\(", re.M
)


def _reread_dropped(
    key: str, code: str, before: Mapping[str, VariableInfo], earlier: Sequence[str]
) -> str:
    """A column an earlier cell added to a frame that this cell read from its file again,
    which replaced the frame (a follow-up question's cell starts with the read it wrote
    for the first question: held-out follow-up chain, 2026-12-07). The kernel's frame is
    the new one now, so the hint gives the earlier cell's line that made the column."""
    for match in _READS.finditer(code):
        frame = before.get(match.group(1))
        if frame is None or key not in (frame.columns or ()):
            continue
        line = code[match.start() :].split("\n", 1)[0].strip()
        made = _line_making(frame.name, key, earlier)
        again = (
            f"Make it again as the earlier cell did (`{made}`), then go on without reading "
            "the file again"
            if made
            else "Compute it again as the earlier cell did, then go on without reading the "
            "file again"
        )
        return (
            f"Hint: {key!r} is a column an earlier cell gave {frame.name}, and this cell "
            f"read the file again (`{_shortened(line)}`), which replaced {frame.name} and "
            f"dropped it. {again}: the kernel keeps what earlier cells made."
        )
    return ""


def _line_making(frame: str, column: str, earlier: Sequence[str]) -> str:
    """The last one-line assignment of ``frame[column]`` in the earlier cells, or ""."""
    pattern = re.compile(
        rf"^[ \t]*{re.escape(frame)}\[(['\"]){re.escape(column)}\1\][ \t]*=[^=].*$", re.M
    )
    for code in reversed(earlier):
        lines = [m.group(0).strip() for m in pattern.finditer(code)]
        if lines and _balanced(lines[-1]):
            return _shortened(lines[-1], 200)
    return ""


def _balanced(line: str) -> bool:
    return all(line.count(a) == line.count(b) for a, b in ("()", "[]", "{}"))


def _shortened(line: str, most: int = 80) -> str:
    return line if len(line) <= most else line[: most - 3] + "..."


def _names_a_column(line: str, code: str) -> bool:
    """A preview ``!`` line about a column the code uses (by its quoted name)."""
    match = re.match(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", line)
    return match is not None and match.group(1)[1:-1] in code


_QUOTED = re.compile(r"""(['"])([^'"\n]{1,80})\1""")


def _more_misspelt(code: str, key: str, frame: VariableInfo) -> str:
    """Other quoted names in the cell that are not columns but close to one: all at once."""
    columns = list(frame.columns or ())
    fixes: list[str] = []
    for _, name in _QUOTED.findall(code):
        if name == key or name in columns or any(name in f for f in fixes):
            continue
        close = _close_columns(name, columns, cutoff=0.75)
        if close:
            fixes.append(f"{name!r} is {close[0]!r}")
    return f" Also in this cell: {'; '.join(fixes[:5])}." if fixes else ""


def _close_columns(name: str, columns: list[str], cutoff: float = 0.6) -> list[str]:
    """Columns ``name`` may mean: the same without case, spaces and symbols; one that starts
    so (``Delta 15 N`` for ``Delta 15 N (o/oo)``); else the closest by spelling."""
    bare = _squash(name)
    same = [c for c in columns if _squash(c) == bare]
    if not same and len(bare) >= 4:
        same = [c for c in columns if _squash(c).startswith(bare)][:3]
    return same or difflib.get_close_matches(name, columns, n=3, cutoff=cutoff)
