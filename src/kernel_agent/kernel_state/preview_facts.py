"""What the data preview measured, as data: :class:`FileFacts` per file, from the kernel.

The preview (``kernel_probe``) reads each data file in the kernel and, when asked, sends
after its text a JSON object: per file, the arguments of the read call that parsed it
(separator, encoding, decimal comma, lines above the header and below the table, a
blank after each separator, no header), every column's name, and
the strftime format that parses each date column. The kernel is hostile:
:func:`split_facts` keeps only what has the expected shape and bounds, and drops the rest
without a word (the text is unchanged).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from .kernel_probe import FACTS_MARK

__all__ = ["FileFacts", "split_facts", "parsed_dates"]

_MAX_FILES = 50
_MAX_COLUMNS = 500
_MAX_NAME = 200
_MAX_MARK = 20
_MAX_SKIP = 50
_MAX_SHOWN = 100
_SEPARATORS = frozenset({",", ";", "\t", "|", r"\s+"})  # r"\s+": runs of blanks
_ENCODING = re.compile(r"[A-Za-z0-9_.-]{1,20}")
#: a text a file writes for a gap ('NA', 'n/a', '-'): no quote, backslash or line break
_MARK = re.compile(r"[^'\"\\\n\r]{1,20}")
#: a strftime format of the preview's list: %-codes and separators only
_DATE_FORMAT = re.compile(r"(?:%[YymdbBHMS]|[-/.:, ]){2,30}|%s")  # %s: seconds since 1970


@dataclass(frozen=True)
class FileFacts:
    """One previewed table: its read call's arguments, its columns, its date formats."""

    sep: str = ","
    encoding: str = "utf-8"
    decimal_comma: bool = False
    #: lines above the header (a title) that the read skips: ``skiprows``
    skiprows: int = 0
    #: a blank after every separator (``a, b``): ``skipinitialspace=True``
    spaced: bool = False
    #: lines at the end that are not rows (a source note): ``skipfooter``
    skipfooter: int = 0
    #: no header line: the first line is a row (``header=None``)
    headerless: bool = False
    #: the only texts read as missing, when a text pandas reads as missing by default is a
    #: code of its column ('NA' among 'AF', 'EU'): ``keep_default_na=False, na_values=kept``
    kept: tuple[str, ...] | None = None
    #: True when the preview read it as delimited text (``pd.read_csv``)
    delimited: bool = False
    columns: tuple[str, ...] = ()
    dates: Mapping[str, str] = field(default_factory=dict)
    #: columns of numbers stored as text (thousands separators, currency, percent, or a
    #: few values that are not numbers): ``pd.to_numeric`` of the digits reads them
    numeric: tuple[str, ...] = ()
    #: columns of one number and one unit each ('50 kg'): the number reads them
    units: tuple[str, ...] = ()
    #: columns of whole numbers read as float64 because some are missing (no int cast)
    whole: tuple[str, ...] = ()
    #: columns of lists written as text ("['Action', 'Drama']")
    lists: tuple[str, ...] = ()
    #: the distinct values of text columns with few of them (at most 30)
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: what a column writes for a missing value that pandas reads as text ('.', '?', '-')
    missing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: (column, label) of a last row that holds the totals of the rows above ('Total')
    total: tuple[str, str] | None = None
    #: the text values of the rows the preview shows (its first rows)
    shown: tuple[str, ...] = ()


def split_facts(text: str) -> tuple[str, dict[str, FileFacts]]:
    """The preview's text, and its facts by file name (empty when absent or malformed)."""
    head, mark, tail = text.partition(FACTS_MARK)
    if not mark:
        return text, {}
    try:
        raw = json.loads(tail)
    except (ValueError, RecursionError):
        return head, {}
    if not isinstance(raw, dict):
        return head, {}
    facts: dict[str, FileFacts] = {}
    for name, entry in list(raw.items())[:_MAX_FILES]:
        checked = _file_facts(entry)
        if isinstance(name, str) and 0 < len(name) <= _MAX_NAME and checked is not None:
            facts[name] = checked
    return head, facts


def _file_facts(entry: Any) -> FileFacts | None:
    if not isinstance(entry, dict):
        return None
    columns = entry.get("columns")
    if not isinstance(columns, list):
        return None
    names = tuple(c for c in columns[:_MAX_COLUMNS] if isinstance(c, str) and len(c) <= _MAX_NAME)
    known = frozenset(names)  # membership in one step: a hostile entry may list many names
    dates_raw = entry.get("dates")
    dates = {
        str(c): f
        for c, f in _entries(dates_raw)
        if c in known and isinstance(f, str) and _DATE_FORMAT.fullmatch(f)
    }
    numeric_raw = entry.get("numeric")
    numeric = tuple(
        c
        for c in (numeric_raw if isinstance(numeric_raw, list) else ())[:_MAX_COLUMNS]
        if isinstance(c, str) and c in known
    )
    values_raw = entry.get("values")
    values = {
        str(c): tuple(v for v in vs[:30] if isinstance(v, str) and len(v) <= 100)
        for c, vs in _entries(values_raw)
        if c in known and isinstance(vs, list)
    }
    missing_raw = entry.get("missing")
    missing = {
        str(c): marks
        for c, ms in _entries(missing_raw)
        if c in known
        and isinstance(ms, list)
        and (marks := tuple(m for m in ms[:3] if isinstance(m, str) and len(m) <= _MAX_MARK))
    }
    units, whole, lists = (
        _named_columns(entry.get(key), known) for key in ("units", "whole", "lists")
    )
    shown = entry.get("shown")
    total = entry.get("total")
    if not (
        isinstance(total, list)
        and len(total) == 2
        and total[0] in known
        and isinstance(total[1], str)
        and 0 < len(total[1]) <= _MAX_MARK * 2
    ):
        total = None
    common = {
        "columns": names,
        "dates": dates,
        "numeric": numeric,
        "units": units,
        "whole": whole,
        "lists": lists,
        "values": values,
        "missing": missing,
        "total": tuple(total) if total else None,
        "shown": tuple(
            v
            for v in (shown if isinstance(shown, list) else ())[:_MAX_SHOWN]
            if isinstance(v, str) and 0 < len(v) <= _MAX_NAME
        ),
    }
    read = entry.get("read")
    if not isinstance(read, dict):
        return FileFacts(**common)  # type: ignore[arg-type]
    sep, encoding = read.get("sep"), read.get("encoding")
    if sep not in _SEPARATORS or not isinstance(encoding, str) or not _ENCODING.fullmatch(encoding):
        return FileFacts(**common)  # type: ignore[arg-type]
    return FileFacts(
        sep=str(sep),
        encoding=encoding,
        decimal_comma=read.get("decimal") is True,
        skiprows=skip if type(skip := read.get("skip")) is int and 0 <= skip <= _MAX_SKIP else 0,
        spaced=read.get("spaced") is True,
        skipfooter=foot if type(foot := read.get("footer")) is int and 0 <= foot <= 5 else 0,
        headerless=read.get("headerless") is True,
        kept=_kept(read.get("kept")),
        delimited=True,
        **common,  # type: ignore[arg-type]
    )


def _kept(raw: Any) -> tuple[str, ...] | None:
    """The gap marks of a read that keeps pandas' default missing texts: a list of up to 11
    short strings with no quote or backslash, with the empty field first; else None."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= 11 or raw[0] != "":
        return None
    if not all(isinstance(m, str) and _MARK.fullmatch(m) for m in raw[1:]):
        return None
    return tuple(raw)


def _named_columns(raw: Any, known: frozenset[str]) -> tuple[str, ...]:
    """The columns of ``raw`` (a list, else none) that the file has."""
    return tuple(c for c in (raw if isinstance(raw, list) else ())[:_MAX_COLUMNS]
                 if isinstance(c, str) and c in known)  # fmt: skip


def _entries(raw: Any) -> list[tuple[Any, Any]]:
    """The first entries of ``raw`` (a mapping, else none): one per column at most."""
    return list(islice(raw.items(), _MAX_COLUMNS)) if isinstance(raw, dict) else []


def parsed_dates(module: str, column: str, fmt: str) -> str:
    """The code that parses ``column`` (an expression) written as ``fmt`` says: seconds
    since 1970 (``%s``) by their unit, ``yyyymmdd`` numbers as text (as numbers they are
    nanoseconds after 1970), any other format as it is."""
    if fmt == "%s":
        return f"{module}.to_datetime({column}, unit='s')"
    if fmt == "%Y%m%d":
        return f"{module}.to_datetime({column}.astype(str), format='%Y%m%d')"
    return f"{module}.to_datetime({column}, format={fmt!r})"
