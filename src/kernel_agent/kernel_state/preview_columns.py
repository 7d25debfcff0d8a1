"""The part of the data preview's source that checks a table's columns, as source text.

:mod:`.preview_source` joins it into the code the kernel runs (plain Python for whatever
pandas the kernel has; it imports nothing from kernel-agent). ``_shape_issues`` gives the
lines starting with ``!`` that name what will trip code up in a table, each with its
one-line fix: numbers stored as text (thousands, currency, a decimal comma, a scale
letter, units, negatives in parentheses), dates (one format, mixed formats, padded,
written as numbers), durations, one value written several ways, lists written as text,
missing values written as text, and a last row of totals; it records what it found in
the file's facts.
"""

from __future__ import annotations

__all__ = ["COLUMNS_SOURCE"]

COLUMNS_SOURCE = r'''
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_GROUPED = r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"
#: what a scale letter after a number stands for ('149k', '2.5M')
_SCALE = {"k": "1e3", "K": "1e3", "M": "1e6", "B": "1e9"}

def _text_values(series):
    """Up to 5000 of a text column's values, as str; None if it is not a text column."""
    if series.dtype.kind != "O" and str(series.dtype) not in ("str", "string"):
        return None
    values = series.dropna()
    if len(values) > 5000:
        values = values.sample(5000, random_state=0)
    return values

def _decimal_comma(df):
    """A ;-separated file whose text columns hold numbers like 3,14 or 1.234,50 € (a
    decimal comma, a dot between thousands)."""
    for c in df.columns[:60]:
        values = _text_values(df[c])
        if values is None or not len(values):
            continue
        texts = values.astype(str).str.replace(r"[$€£%\s]", "", regex=True)
        comma = (texts.str.fullmatch(r"[-+]?(?:\d{1,3}(?:\.\d{3})+|\d+),\d+")
                 & ~texts.str.fullmatch(_GROUPED))
        if comma.mean() > 0.5:
            return True
    return False

#: what an export writes for a missing value that pandas' default reader keeps as text
_MISSING_MARKS = {".", "?", "-", "--", "---", "_", "*", "missing", "not available",
                  "not recorded", "no data"}

_TIME_WORDS = re.compile(
    r"\b(?:date|day|week|month|year|time|season|quarter|hour|spell|consecutive|period|"
    r"annual|daily|decade|century)")
#: a task that speaks of time: the words above, a month, or a year ("in March 2020")
_TIME_ASKED = re.compile(
    _TIME_WORDS.pattern[:-1] + r"|january|february|march|april|june|july|august|september|"
    r"october|november|december|(?:1[89]|20)\d\d\b)")

def _date_format(texts):
    """The one strftime format that parses (nearly) every value, else None: a local date
    ('11/11/07') the model would otherwise match as text ('2008' in it) or misread."""
    import pandas as pd
    sample = texts.head(500)
    found = []
    for fmt in ("%Y-%m-%d", "%m/%d/%y", "%d/%m/%y", "%m/%d/%Y", "%d/%m/%Y", "%d.%m.%Y",
                "%d.%m.%y", "%Y/%m/%d", "%d-%m-%Y", "%m-%d-%Y", "%Y-%m-%d %H:%M:%S",
                "%d %b %Y", "%b %d, %Y", "%d-%b-%y", "%d-%b-%Y", "%B %d, %Y", "%d %B %Y"):
        try:
            parsed = pd.to_datetime(sample, format=fmt, errors="coerce")
        except Exception:
            continue
        if parsed.notna().mean() >= 0.95:
            found.append(fmt)
    if len(found) == 2 and set(found) in ({"%m/%d/%y", "%d/%m/%y"}, {"%m/%d/%Y", "%d/%m/%Y"}):
        return found[0]  # every day is 12 or less: month first, as pandas reads it
    if found:
        return found[0] if len(found) == 1 else None
    return _mixed_dates(sample)

def _codes(df, found):
    """{column: text} of the texts pandas read as missing (``found``, from :func:`_na_text`)
    written as every other value of their column is, letter case and digits alike: 'NA'
    among 'AF', 'AS', 'EU' (the continents of a drinks file, where it is North America;
    Namibia's code among countries'). Three other values at least."""
    names = {str(c): c for c in df.columns[:200]}
    codes = {}
    for c, words in found.items():
        if c not in names or getattr(df[names[c]], "ndim", 2) != 1:
            continue  # a name used twice
        others = {_shape(v) for v in df[names[c]].dropna().astype(str).unique()[:200]}
        if df[names[c]].nunique() < 3 or len(others) != 1:
            continue
        code = next((w for w in words if {_shape(w)} == others), None)
        if code is not None:
            codes[c] = code
    return codes

def _shape(text):
    """'NA' -> 'AA', 'Eu1' -> 'Aa9': the case of each letter, digits as 9, the rest kept."""
    return "".join("A" if ch.isupper() else "a" if ch.islower() else "9" if ch.isdigit()
                   else ch for ch in text[:40])

def _newest_first(written, fmt):
    """A note when the rows run from the latest date back (a stock export): "the first
    trading day of 2014" was answered from the first row, the last day (scratch,
    2026-12-07)."""
    import pandas as pd
    if fmt == "mixed" or len(written) < 10:
        return ""
    dates = pd.to_datetime(written, format=fmt, errors="coerce").dropna()
    if len(dates) < 0.9 * len(written) or not dates.is_monotonic_decreasing or dates.nunique() < 3:
        return ""
    name = _shown(written.name)
    return (f"; the rows run newest first, from {written.iloc[0][:20]!r} back to "
            f"{written.iloc[-1][:20]!r}: sort oldest first (df = df.sort_values({name}))"
            " before taking a first or last row")

def _several(texts):
    """The separator of a column that holds several values in a cell ('Dramas, Comedies';
    'Action|Adventure'), a number of them that differs from row to row, drawn from a few
    short values that recur; else None. A name 'Smith, John' always has two parts, a
    sentence's parts do not recur."""
    sample = texts.head(2000)
    for sep in (", ", "|", "; "):
        counts = sample.str.count(re.escape(sep))
        if (counts > 0).mean() < 0.2 or counts.nunique() < 2:
            continue
        parts = sample.str.split(sep, regex=False).explode().str.strip()
        top = parts.value_counts()
        if parts.str.len().max() <= 40 and top.iloc[0] >= 3 and len(top) <= 0.5 * len(parts):
            return sep
    return None

def _mixed_dates(sample):
    """'mixed' when no one format parses the dates but the formats together parse nearly
    all ('2019-01-05' and '05/01/2019' in one column), else None."""
    import pandas as pd
    parsed = pd.Series(False, index=sample.index)
    for fmt in ("%Y-%m-%d", "%m/%d/%Y", "%d/%m/%Y", "%d.%m.%Y", "%Y/%m/%d", "%b %d, %Y",
                "%d %b %Y", "%B %d, %Y", "%d %B %Y", "%Y-%m-%d %H:%M:%S"):
        try:
            parsed |= pd.to_datetime(sample, format=fmt, errors="coerce").notna()
        except Exception:
            continue
    return "mixed" if parsed.mean() >= 0.95 else None

def _listed_text(texts):
    """Nearly every value is a Python or JSON list written as text ("['Action', 'Drama']",
    "[{'id': 28, 'name': 'Action'}]"), as Kaggle exports of lists are."""
    import ast
    bracketed = texts.str.startswith("[") & texts.str.endswith("]")
    if bracketed.mean() < 0.9:
        return False
    try:
        return all(isinstance(ast.literal_eval(v), list) for v in texts[bracketed].head(20))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False

def _other_form(texts):
    """A value written in another shape than the first ('05/01/2019' beside '2019-01-05')."""
    shape = texts.str.replace(r"\d", "0", regex=True)
    other = texts[shape != shape.iloc[0]]
    return other.iloc[0][:20] if len(other) else ""

def _number_dates(series):
    """The fix for whole numbers that are dates: 20190105 (yyyymmdd) or seconds since 1970
    (1546646400), in a column whose name speaks of time ('issued_at' too); else ""."""
    words = re.sub(r"[\W_]+", " ", str(series.name).lower())  # 'obs_date': a date
    stamped = re.search(r"\b(?:at|ts|epoch|unix)\s*$", words)  # 'issued_at', 'created_ts'
    if series.dtype.kind not in "iu" or not (_TIME_WORDS.search(words) or stamped):
        return ""
    known = series.dropna()
    if not len(known):
        return ""
    name = repr(str(series.name))
    if known.between(19000101, 21001231).all() and (known // 100 % 100).between(1, 12).all():
        _NOW.setdefault("dates", {})[str(series.name)] = "%Y%m%d"  # preflight: as text
        return (f"  ! {name} holds dates as numbers (e.g. {int(known.iloc[0])}): df[{name}] = "
                f"pd.to_datetime(df[{name}].astype(str), format='%Y%m%d')")
    if known.between(315532800, 4102444800).all():  # 1980 to 2100, in seconds
        _NOW.setdefault("dates", {})[str(series.name)] = "%s"  # preflight: unit='s'
        return (f"  ! {name} holds times as seconds since 1970 (e.g. {int(known.iloc[0])}): "
                f"df[{name}] = pd.to_datetime(df[{name}], unit='s')")
    return ""

def _shape_issues(df):
    """Lines that say what in a table will trip code up, each with the one-line fix.

    When the task names some of the table's columns, the fix lines are of those (and of
    dates) only; the others are named on one line. A small model copies every fix it is
    shown into its first cell: a wide export's fixes cut its reply at the token limit or
    put the wrong column in its code."""
    lines, spaced = [], [c for c in df.columns if str(c) != str(c).strip()]
    comma = bool((_NOW.get("read") or {}).get("decimal"))
    try:  # a failed check costs its own line, not the table's other lines
        total = _total_row(df)
    except Exception:
        total = ""
    if total:
        lines.append(total)
    try:
        lines += _header_rows(df) + _repeated_ids(df)
    except Exception:
        pass
    focus = set(_mentioned(df.columns))
    aside = []
    if spaced:
        shown = ", ".join(_shown(c) for c in spaced[:6])
        lines.append(f"  ! column names with a space at an end: {shown} (write them so, or "
                     "first df.columns = df.columns.str.strip())")
    whole = []
    for c in df.columns[:200]:
        series = df[c]
        try:
            if (dated := _number_dates(series)) and (not focus or c in focus
                                                     or _TIME_ASKED.search(FOCUS.lower())):
                lines.append(dated)
                continue
            if series.dtype.kind == "f" and series.isna().any():
                known = series.dropna()
                if len(known) and (known == known.round()).all():
                    whole.append(c)
                continue
            values = _text_values(series)
            if values is None or not len(values):
                continue
            kinds = {type(v).__name__ for v in values.head(2000)}
            texts = written = values.astype(str).str.strip()
            if comma:  # read as the dot-decimal text the patterns know: 1.234,5 as 1,234.5
                texts = texts.str.translate(str.maketrans(",.", ".,"))
            plain = texts.str.fullmatch(_NUM)
            money = texts.str.fullmatch(r"[$€£]?\s*(?:" + _GROUPED + "|" + _NUM
                                        + r")\s*[%+$€£]?")
            grouped = (texts.str.contains(r"\d,\d{3}\b")
                       | texts.str.contains(r"^[$€£]|[%+$€£]$"))
            unit = texts.str.fullmatch(
                r"[<>~≤≥]?=?\s*[$€£]?\s*(?:" + _GROUPED + "|" + _NUM + r")\s*"
                r"(?:(?:-|–|to)\s*(?:" + _GROUPED + "|" + _NUM + r"))?\s*"
                r"(?:%|[A-Za-zµ°/²³]{1,8}\.?|/\s*\d{1,3})?(?:\+)?"  # '4.1/5': out of 5
            )
            dates = written.str.contains(r"\d{1,4}(?:-\d{1,2}-|/\d{1,2}/|\.\d{1,2}\.)\d{1,4}|"
                                       r"\d:\d\d|"  # one separator twice: not '4.1/5'"
                                       r"\d{1,2}[ -][A-Z][a-z]{2}[ -]\d{2,4}|"
                                       r"[A-Z][a-z]{2,8} \d{1,2}, \d{4}")
        except Exception:
            continue
        name = _shown(c)
        said = lines if not focus or c in focus else []
        spelt = _spellings(values.astype(str))
        if spelt:
            if said is lines or _names_value(spelt[0]):
                lines.append(f"  ! {name} writes one value in several ways ({spelt[1]}): "
                             f"count them as one: df[{name}] = df[{name}]{spelt[2]}")
            continue
        if _listed_text(written):
            _NOW.setdefault("lists", []).append(str(c))
            said.append(f"  ! {name} holds lists written as text (e.g. {written.iloc[0][:40]!r}):"
                        f" import ast; df[{name}] = df[{name}].apply(ast.literal_eval)"
                        + (" (a list of dicts: [d['name'] for d in row])"
                           if written.iloc[0].startswith("[{") else "")
                        + f"; one row per item: df.explode({name})")
            if said is not lines:
                aside.append((c, "lists"))
            continue
        if _DURATION.fullmatch(texts.iloc[0]) and texts.str.fullmatch(_DURATION).mean() > 0.9:
            said.append(f"  ! {name} holds durations as text (e.g. {written.iloc[0][:20]!r}): "
                        f"in minutes: df[{name}] = pd.to_timedelta(df[{name}], "
                        "errors='coerce').dt.total_seconds() / 60")
            if said is not lines:
                aside.append((c, "durations"))
            continue
        if dates.mean() > 0.5:
            fmt = _date_format(written) if dates.mean() > 0.9 else None
            padded = ".str.strip()" if (values.astype(str) != written).any() else ""
            if fmt and not padded:  # preflight adds the format to a cell's to_datetime
                _NOW.setdefault("dates", {})[str(c)] = fmt
            if fmt and focus and c not in focus and not _TIME_ASKED.search(FOCUS.lower()):
                aside.append((c, "dates"))
            elif fmt:
                lines.append(f"  ! {name} holds dates as text (e.g. {written.iloc[0][:20]!r}"
                             + (f", {_other_form(written)!r}" if fmt == "mixed" else "")
                             + f"): df[{name}] = pd.to_datetime(df[{name}]{padded}, "
                             f"format={fmt!r})" + _newest_first(written, fmt))
            continue
        several = _several(written)
        if several:
            example = written[written.str.contains(several, regex=False)].iloc[0][:50]
            said.append(f"  ! {name} holds several values in a cell, separated by {several!r} "
                        f"(e.g. {example!r}): one row per value: df[{name}] = df[{name}].str."
                        f"split({several!r}); df = df.explode({name})")
            if said is not lines:
                aside.append((c, "several values a cell"))
            continue
        paren = texts.str.fullmatch(r"\(\s*[$€£]?\s*(?:" + _GROUPED + "|" + _NUM + r")\s*\)")
        if not comma and paren.any() and (money | paren).mean() >= 0.8:
            example = ", ".join(repr(v[:20]) for v in written[paren].drop_duplicates().head(2))
            said.append(f"  ! {name} holds numbers stored as text, negatives in parentheses "
                        f"(e.g. {example}): df[{name}] = pd.to_numeric(df[{name}].astype(str)"
                        ".str.strip().str.replace(r'^\\((.*)\\)$', r'-\\1', regex=True)"
                        ".str.replace(r'[,$€£\\s]', '', regex=True), errors='coerce')")
            continue
        odd = texts[~money]
        if plain.mean() >= 0.5 and _coded(texts[plain], texts[~plain]):
            continue  # identifiers ('C536379' among '536365'): no numbers with text
        example = ", ".join(repr(v[:30]) for v in written[~money].drop_duplicates().head(2))
        if money.mean() >= 0.8 and (grouped.any() or not plain.all()):
            _NOW.setdefault("numeric", []).append(str(c))
            if grouped.any() and comma:
                fix = (f"pd.to_numeric(df[{name}].astype(str).str.replace(r'[.$€£%+\\s]', '', "
                       "regex=True).str.replace(',', '.'), errors='coerce')")
            elif grouped.any():
                fix = (f"pd.to_numeric(df[{name}].astype(str).str.replace(r'[,$€£%+\\s]', '', "
                       "regex=True), errors='coerce')")
            else:
                fix = f"pd.to_numeric(df[{name}], errors='coerce')"
            what = f"{len(odd)} not numbers, e.g. {example}" if len(odd) else "e.g. " + ", ".join(
                repr(v[:20]) for v in written[grouped].drop_duplicates().head(2))
            said.append(f"  ! {name} holds numbers stored as text ({what}): "
                         f"df[{name}] = {fix}")
        elif unit.mean() >= 0.8 and (~plain).any() and texts.nunique() > 2 * FEW:
            bare = texts.str.replace(r"^[$€£]\s*", "", regex=True)  # '$16.3M': a scale too
            single = bare.str.extract(r"^(?:" + _NUM + r")\s*([A-Za-zµ°/²³%]{1,8}\.?)?$")[0]
            units = set(single.dropna())
            if (single.notna().sum() + plain.sum() >= 0.95 * len(texts) and len(units) == 1
                    and not units <= set(_SCALE)):
                _NOW.setdefault("units", []).append(str(c))  # '50 kg': one number, one unit
            example = ", ".join(repr(v[:20]) for v in written[~plain].drop_duplicates().head(3))
            digits = ".str.replace('.', '').str.replace(',', '.')" if comma else (
                ".str.replace(',', '')")
            if units and units <= {"k", "K", "M", "B"}:  # '149k', '2.5M': a scale, not a unit
                scale = ", ".join(f"'{u}': {_SCALE[u]}" for u in sorted(units))
                said.append(f"  ! {name} holds numbers with a scale letter ({example}; k is a "
                            f"thousand, M a million): df[{name}] = df[{name}].astype(str)"
                            f"{digits}.str.extract(r'(-?\\d+\\.?\\d*)\\s*"
                            f"([kKMB]?)$').pipe(lambda m: m[0].astype(float) * "
                            f"m[1].map({{{scale}}}).fillna(1))")
            else:
                said.append(f"  ! {name} holds numbers with text ({example}); the first "
                            f"number: df[{name}].astype(str){digits}.str.extract("
                            f"r'(-?\\d+\\.?\\d*)')[0].astype(float)")
        elif len(kinds) > 1 and kinds & {"int", "float"} and "str" in kinds:
            said.append(f"  ! {name} mixes numbers and text ({' and '.join(sorted(kinds))}): "
                         f"pd.to_numeric(df[{name}], errors='coerce') keeps the numbers")
        else:
            raw = values.astype(str)
            key = raw.str.strip().str.lower()
            marks = raw[key.isin(_MISSING_MARKS) | (key == "")]
            if len(marks) and len(marks) <= len(texts) / 2:
                found = list(marks.value_counts().index[:3])
                mark = found[0] if len(found) == 1 else found
                count = int(series.isin(found).sum())
                _NOW.setdefault("missing", {})[str(c)] = [str(m) for m in found]
                said.append(f"  ! {name} writes a missing value as "
                            f"{' or '.join(repr(m) for m in found)} ({count} rows): "
                            f"df[{name}] = df[{name}].replace({mark!r}, pd.NA)")
                if said is not lines:
                    aside.append((c, f"missing as {found[0]!r}"))
                continue
        if said is not lines and said:
            aside.append((c, "numbers"))
    if whole:
        _NOW.setdefault("whole", []).extend(str(c) for c in whole)
    whole = [c for c in whole if not focus or c in focus]
    if whole:
        shown = ", ".join(_shown(c) for c in whole[:6])
        more = f" and {len(whole) - 6} more" if len(whole) > 6 else ""
        lines.append(f"  ! whole numbers as float64 because of missing values: {shown}{more} "
                     "(.astype(int) fails on NaN: .dropna() first, or .astype('Int64'))")
    if aside:
        shown = ", ".join(f"{_shown(c)} ({what})" for c, what in aside[:8])
        lines.append(f"  other columns hold text to convert: {shown}; the task does not name "
                     "them: leave them as they are unless you use one")
    return lines[:8]

def _coded(numbers, odd):
    """Identifiers, not numbers with a few bad values or with units: every value that is no
    number is a number's digits with up to three capitals before or after ('C536379' among
    '536365', a cancelled invoice; '85099B' among '22745'), as many digits as the numbers
    mostly have, in two values or more. One corrupt row ('BPM110KeyAModeMajor'), a unit
    ('50kg') and a scale letter ('350K') are no codes."""
    if odd.nunique() < 2 or not len(numbers) or not numbers.str.fullmatch(r"\d+").all():
        return False
    if not odd.str.fullmatch(r"[A-Z]{1,3}\d+|\d+[A-Z]{1,3}").all():
        return False  # a unit is written small ('50kg')
    if set(odd.str.replace(r"\d+", "", regex=True)) <= {"K", "M", "B"}:
        return False  # a scale letter ('350K')
    width = numbers.str.len().mode().iloc[0]
    return bool((odd.str.count(r"\d") == width).mean() >= 0.8)


def _header_rows(df):
    """Rows that are the header line again (exports joined together): every value of the
    row is its column's name. They make every column text and count as rows."""
    text = [c for c in df.columns[:50] if df[c].dtype == object or str(df[c].dtype) == "str"]
    if len(text) < 2 or len(text) < len(df.columns[:50]):
        return []
    same = None
    for c in text:
        hit = df[c].astype(str).str.strip() == str(c).strip()
        same = hit if same is None else same & hit
    k = int(same.sum())
    if not k:
        return []
    first = _shown(text[0])
    return [f"  ! {k} rows repeat the header line (files joined together): drop them first: "
            f"df = df[df[{first}] != {first}].reset_index(drop=True); then convert the columns"]


def _repeated_ids(df):
    """An identifier column whose things the task counts ('how many orders' on 'order_id',
    'invoices' on 'InvoiceNo') and whose values repeat: a thing has several rows, so the
    rows are no count of them (chipotle's 4,622 lines hold 1,834 orders)."""
    task = FOCUS.lower()
    lines = []
    for c in df.columns[:200]:
        m = re.fullmatch(r"([A-Za-z][A-Za-z ]*?)(?:[ _.-]+(?i:id|no|num|number|code|key)"
                         r"|ID|Id|No|Num|Number|Code|Key)", str(c).strip())
        stem = m.group(1).strip().lower() if m else ""
        counted = (r"(?:\bhow many|\bnumber of|\bcount(?: of| the)?)\s+(?:[a-z-]+\s+){0,2}?"
                   + re.escape(stem) + r"(?:s|es)?\b|\bper\s+" + re.escape(stem) + r"\b")
        if len(stem) < 3 or not re.search(counted, task):
            continue
        known = df[c].dropna()
        n, distinct = len(known), int(known.nunique())
        if 1 < distinct < 0.9 * n:
            name = _shown(c)
            lines.append(f"  ! {name} repeats ({distinct} distinct values in {n} rows): one "
                         f"{stem} has several rows; count {stem}s with df[{name}].nunique() "
                         f"(of the rows kept: df.loc[mask, {name}].nunique()), not rows")
    return lines[:2]


def _total_row(df):
    """A line when every number of the table's last row is the sum of its column above (an
    export's 'Total' line, which a mean or a max would count as one more record), with the
    filter that drops it; else ""."""
    if not 4 <= len(df) < PARTIAL_ROWS:
        return ""
    numbers = [c for c in df.columns[:200] if df[c].dtype.kind in "if"]
    last, above = df.iloc[-1], df.iloc[:-1]
    summed = [c for c in numbers if last[c] == last[c] and last[c] != 0
              and (above[c] != 0).sum() >= 2
              and abs(last[c] - above[c].sum()) <= 1e-6 * abs(last[c])]
    if not summed or len(summed) < len([c for c in numbers if last[c] == last[c]]):
        return ""
    label = next(((c, last[c]) for c in df.columns[:200] if isinstance(last[c], str)), None)
    if label and len(label[1]) <= 40:
        _NOW["total"] = [str(label[0]), label[1]]
        drop = f"df = df[df[{str(label[0])!r}] != {label[1]!r}]"
    else:
        drop = "df = df.iloc[:-1]"
    shown = f" ({label[1][:40]!r})" if label else ""
    return (f"  ! the last row{shown} holds the totals of the rows above ("
            + ", ".join(_shown(c) for c in summed[:4]) + f"), not a record: {drop}")

#: a duration as text: '1h 26min', '45 min', '2 hours 5 minutes', '1:26:00'
_DURATION = re.compile(
    r"\d+(?:\.\d+)?\s*(?:h|hr|hrs|hours?)(?:\s*\d+\s*(?:m|min|mins|minutes?))?"
    r"|\d+\s*(?:min|mins|minutes?)|\d{1,3}:\d\d:\d\d")

def _spellings(texts):
    """A label column that writes one value several ways ('Female', 'female ', 'F'):
    (the values so written, as shown, the pandas that makes them one), else None. The
    ways: case and blanks at the ends, and one letter standing for the one value of the
    column that starts with it."""
    counts = texts.value_counts()
    if not 1 < len(counts) <= 30 or counts.index.str.len().max() > 40:
        return None
    written = list(counts.index)
    keys = {}
    for w in written:
        keys.setdefault(w.strip().lower(), []).append(w)
    long = [k for k in keys if len(k) > 1]
    initials = {k[0] for k in long}
    letters = [k for k in keys if len(k) == 1 and k.isalpha()]
    short = (len(initials) == len(long) and letters and all(k in initials for k in letters)
             and len(long) > 1)
    if not short and all(len(v) == 1 for v in keys.values()):
        return None
    groups = [k for k in long if len(keys[k]) > 1 or (short and k[0] in letters)]
    if not groups:
        return None
    shown = []
    for k in groups[:3]:
        ways = keys[k] + (keys.get(k[0], []) if short else [])
        shown.append(" = ".join(repr(w) for w in ways[:5]))
    spelled = {k: w for w in long for k in letters if w[0] == k}
    fix = ".str.strip().str.lower()" + (f".replace({spelled!r})" if short else "")
    return groups, "; ".join(shown), fix

def _names_value(keys):
    """The task names one of these values (a word of it)."""
    task = FOCUS.lower()
    return any(re.search(r"\b" + re.escape(k) + r"\b", task) for k in keys)
'''
