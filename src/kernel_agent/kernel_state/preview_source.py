"""The code a kernel runs to preview the data files in its cwd, as one source text.

:mod:`.kernel_probe` runs it in a cell or as a ``user_expression`` (in globals of its own,
so it leaves no names), with its settings (``NAMES``, ``BUDGET``, ``FOCUS``...) as those
globals. It is plain Python for whatever pandas the kernel has: it imports nothing from
kernel-agent, which the kernel may not have. For each file: its size, the read call that
works (separator, encoding, decimal comma sniffed), shape, columns with dtypes, lines
starting with ``!`` naming what will trip code up with the one-line fix (for the columns
the task names), missing values, few distinct values and a few rows; and, on ask, the
facts it measured as JSON (:mod:`.preview_facts` reads them on the host).
"""

from __future__ import annotations

__all__ = ["PREVIEW_SOURCE"]

PREVIEW_SOURCE = r'''
import os
import re

#: what the preview measured, per file: the read call's arguments, every column's name, the
#: strftime format of each date column (sent to the host as JSON after FACTS_MARK, on ask)
FACTS = {}
_NOW = {}  # the facts of the file being previewed
#: the separator of a table whose fields are lined up by runs of blanks
WHITESPACE = r"\s+"
#: lines above a table's header (a title, an export date) that the read may skip
MAX_SKIP = 10

def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024

def _reader(name):
    low = name.lower()
    for ext, kind in ((".csv", "csv"), (".tsv", "tsv"), (".tab", "tsv"), (".xlsx", "excel"),
                      (".xlsm", "excel"), (".xls", "excel"), (".parquet", "parquet"),
                      (".pq", "parquet"), (".jsonl", "jsonl"), (".ndjson", "jsonl"),
                      (".json", "json"), (".txt", "text"), (".dat", "text"),
                      (".data", "text"), (".psv", "csv")):
        if low.endswith(ext):
            return kind
    ext = low.rsplit(".", 1)[-1] if "." in low else ""
    if ext not in NOT_TABLES:  # another name (u.user): a table if its lines split evenly
        return "text"
    return None

def _encoding(path):
    """utf-8 when the file's first MBs decode so, else latin-1 (which decodes any byte)."""
    with open(path, "rb") as fh:
        raw = fh.read(4 << 20)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(raw) - 4:  # not a character cut at the sample's end
            return "latin-1"
    return "utf-8"

def _sep(path, encoding="utf-8", strict=False):
    """(separator, lines to skip) of a delimited file: the one of , ; tab | that splits the
    first lines into the same number of fields, after the lines above the header that
    split into fewer (a title, an export date); (None, 0), if ``strict``, when none does."""
    import csv
    with open(path, newline="", encoding=encoding, errors="replace") as fh:
        sample = fh.read(65536)
    lines = [ln for ln in sample.splitlines()[:40] if ln.strip()]
    if len(sample) == 65536 and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    best, most, skip = None, 0, 0
    for sep in ("\t", "|", ";", ","):
        try:
            counts = [len(row) for row in csv.reader(lines, delimiter=sep)]
        except csv.Error:
            continue
        for k in range(min(MAX_SKIP, len(counts) - 3) + 1):
            body = set(counts[k:])
            if len(body) != 1 or (n := counts[k]) < 2:
                continue
            if k == 1 and counts[0] == n - 1:
                break  # a header without the rows' own names (R's write.table): no title
            if all(c < n for c in counts[:k]) and (n > most or (n == most and k < skip)):
                best, most, skip = sep, n, k
            break
    if best is None and _blank_separated(lines):
        best = WHITESPACE  # fields lined up by runs of blanks (a fixed-width export)
    if best is None and not strict:
        try:
            best = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        except csv.Error:
            best = ","
    if best is None or skip >= len(lines):
        return best, 0
    # the skipped lines as they are in the file: blank lines among them count too
    at, seen = 0, 0
    for at, line in enumerate(sample.splitlines()):
        if line.strip():
            if seen == skip:
                break
            seen += 1
    return best, at

def _blank_separated(lines):
    """Every line splits on runs of blanks into the same number (2 or more) of fields,
    and some field is a number on every line after the first: a table, not prose."""
    rows = [ln.split() for ln in lines]
    if len(rows) < 2 or len({len(r) for r in rows}) != 1 or len(rows[0]) < 2:
        return False
    number = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
    return any(all(number.fullmatch(r[i]) for r in rows[1:]) for i in range(len(rows[0])))

def _read_call(name, sep, encoding, decimal, skip=0):
    args = [repr(name)]
    if sep == WHITESPACE:
        args.append("sep=r'\\s+'")
    elif sep != ",":
        args.append(f"sep={sep!r}")
    if encoding != "utf-8":
        args.append(f"encoding={encoding!r}")
    if decimal:
        args.append("decimal=','")
    if skip:
        args.append(f"skiprows={skip}")
    return f"pd.read_csv({', '.join(args)})"

def _frames(pd, path, kind, size):
    """[(label, DataFrame, note)] for one file."""
    big = size > MAX_READ
    if kind in ("csv", "tsv", "text"):
        encoding = _encoding(path)
        sep, skip = _sep(path, encoding, strict=kind == "text")
        if sep is None:  # a text file that is not a table
            return []
        nrows = PARTIAL_ROWS if big else None
        read = {"sep": sep, "encoding": encoding, "low_memory": False, "nrows": nrows,
                "skiprows": skip}
        df = pd.read_csv(path, **read)
        decimal = sep == ";" and _decimal_comma(df)
        if decimal:
            df = pd.read_csv(path, decimal=",", **read)
        _NOW["read"] = {"sep": sep, "encoding": encoding, "decimal": bool(decimal),
                        "skip": skip}
        call = _read_call(path, sep, encoding, decimal, skip)
        try:
            _NOW["na_text"], gaps = _na_text(pd, df, path, read, decimal)
            marks = ["", *gaps]
            _NOW["na_read"] = call[:-1] + f", keep_default_na=False, na_values={marks!r})"
        except Exception:
            pass
        note = f"first {PARTIAL_ROWS} rows read of a large file" if big else ""
        if sep not in (",", "\t") or kind != ("tsv" if sep == "\t" else "csv"):
            shown = "runs of blanks" if sep == WHITESPACE else repr(sep)
            note = (note + "; " if note else "") + f"separator {shown}"
        if encoding != "utf-8":
            note = (note + "; " if note else "") + f"encoding {encoding!r}, not utf-8"
        if decimal:
            note = (note + "; " if note else "") + "decimal comma"
        if skip:
            what = "line is" if skip == 1 else f"{skip} lines are"
            note = ((note + "; " if note else "") + f"the first {what} not the table (a title "
                    "above the header)")
        if sep != "," or encoding != "utf-8" or decimal or skip:
            note += "\n  read it with: df = " + call
        return [("", df, note)]
    if big:
        raise ValueError(f"too large to preview ({_size(size)})")
    if kind == "excel":
        sheets = pd.read_excel(path, sheet_name=None)
        many = len(sheets) > 1
        found = []
        for k, v in list(sheets.items())[:5]:
            note, header = "", _excel_header(pd, path, k, v)
            if header:
                v = pd.read_excel(path, sheet_name=k, header=header)
                sheet = f", sheet_name={k!r}" if many else ""
                what = "row is" if header == 1 else f"{header} rows are"
                note = (f"the first {what} not the table (a title above the header)\n"
                        f"  read it with: df = pd.read_excel({path!r}{sheet}, header={header})")
            found.append((f"sheet {k!r}" if many else "", v, note))
        return found
    if kind == "parquet":
        return [("", pd.read_parquet(path), "")]
    if kind == "jsonl":
        return [_nested(pd, path, pd.read_json(path, lines=True), lines=True)]
    try:
        return [_nested(pd, path, pd.read_json(path), lines=False)]
    except ValueError:
        return [_nested(pd, path, pd.read_json(path, lines=True), lines=True)]

def _excel_header(pd, path, sheet, df):
    """The row of a sheet that holds its header, when rows above it (a title) made pandas
    name most columns 'Unnamed: n': the first row whose cells are all text, as many as the
    widest row, below rows with fewer cells filled; else 0."""
    unnamed = [c for c in df.columns if str(c).startswith("Unnamed:")]
    if len(df.columns) < 2 or len(unnamed) * 2 < len(df.columns):
        return 0
    raw = pd.read_excel(path, sheet_name=sheet, header=None, nrows=MAX_SKIP + 30)
    filled = raw.notna().sum(axis=1).tolist()
    width = max(filled)
    for r in range(1, min(MAX_SKIP, len(raw) - 1) + 1):
        cells = raw.iloc[r].dropna()
        if filled[r] == width and all(isinstance(v, str) for v in cells):
            return r if all(f < width for f in filled[:r]) else 0
    return 0

def _nested(pd, path, df, lines):
    """(label, frame, note) of a JSON file: when its columns hold nested records
    ({'name': ..., 'country': ...}), the frame flattened by ``pd.json_normalize``, whose
    columns name the inner keys ('user.country'), and the read that does it."""
    nested = [c for c in df.columns[:200] if df[c].dtype.kind == "O"
              and len(df[c].dropna()) and df[c].dropna().map(type).eq(dict).mean() > 0.8]
    if not nested:
        return ("", df, "")
    import json
    with open(path, encoding="utf-8") as fh:
        records = [json.loads(ln) for ln in fh if ln.strip()] if lines else json.load(fh)
    flat = pd.json_normalize(records)
    load = (f"[json.loads(line) for line in open({path!r}) if line.strip()]" if lines
            else f"json.load(open({path!r}))")
    shown = ", ".join(repr(str(c)) for c in nested[:4])
    return ("", flat, f"{shown} held nested records, flattened into columns\n"
                      f"  read it with: import json; df = pd.json_normalize({load})")

def _na_text(pd, df, path, read, decimal):
    """({column: {text: rows}}, [gap marks]): text that pandas reads as missing by default
    ('None', 'NA', 'null'...) in a column whose other values are text, and in no other
    column: as likely a value as a gap (an answer None, Namibia's NA). A text the file
    writes in two columns, or in a column of numbers, is how this file writes a gap: the
    marks."""
    gappy = [c for c in df.columns[:200] if df[c].isna().any()]
    if not gappy:
        return {}, []
    raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""],
                      decimal="," if decimal else ".", **read)
    if raw.shape != df.shape or list(raw.columns) != list(df.columns):
        return {}, []
    found, columns_of = {}, {}
    for c in gappy:
        gaps, words = df[c], raw[c]
        if not isinstance(gaps, pd.Series) or not isinstance(words, pd.Series):
            continue  # a name used twice
        words = words[gaps.isna() & words.notna()].str.strip()
        counts = words[words != ""].value_counts()
        for w in counts.index:
            columns_of[w] = columns_of.get(w, 0) + 1
        kinds = pd.api.types
        text = not (kinds.is_numeric_dtype(gaps) or kinds.is_datetime64_any_dtype(gaps))
        if len(counts) and text:
            found[str(c)] = {str(w): int(n) for w, n in counts.head(3).items()}
        elif len(counts):
            for w in counts.index:
                columns_of[w] = 2  # a gap in a column of numbers
    gaps = sorted(w[:20] for w, n in columns_of.items() if n > 1)[:10]
    return ({c: {w[:20]: n for w, n in words.items() if columns_of.get(w, 0) == 1}
             for c, words in found.items() if any(columns_of.get(w, 0) == 1 for w in words)},
            gaps)

def _na_text_lines(df):
    """A line for each column the task names (any, with no task) whose text pandas read as
    missing: what it held, and the file read with only its own gaps missing: empty fields
    and the texts it writes for a gap elsewhere ('NA' in a number column stays one), so the
    read is right for every column, where a small model copies it."""
    found, focus = _NOW.get("na_text") or {}, {str(c) for c in _mentioned(df.columns)}
    lines = []
    for c, words in found.items():
        if FOCUS and c not in focus:
            continue
        held = " and ".join(f"{w!r} ({n} rows)" for w, n in words.items())
        lines.append(f"  ! {c!r} holds the text {held}, which pandas reads as missing; where "
                     f"it is a value, not a gap, read the file with only its gaps missing: "
                     f"df = {_NOW.get('na_read')}")
    return lines[:2]

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
    (1546646400), in a column whose name speaks of time; else ""."""
    words = re.sub(r"[\W_]+", " ", str(series.name).lower())  # 'obs_date': a date
    if series.dtype.kind not in "iu" or not _TIME_WORDS.search(words):
        return ""
    known = series.dropna()
    if not len(known):
        return ""
    name = repr(str(series.name))
    if known.between(19000101, 21001231).all() and (known // 100 % 100).between(1, 12).all():
        return (f"  ! {name} holds dates as numbers (e.g. {int(known.iloc[0])}): df[{name}] = "
                f"pd.to_datetime(df[{name}].astype(str), format='%Y%m%d')")
    if known.between(315532800, 4102444800).all():  # 1980 to 2100, in seconds
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
    focus = set(_mentioned(df.columns))
    aside = []
    if spaced:
        shown = ", ".join(repr(str(c)) for c in spaced[:6])
        lines.append(f"  ! column names with a space at an end: {shown} (write them so, or "
                     "first df.columns = df.columns.str.strip())")
    whole = []
    for c in df.columns[:200]:
        series = df[c]
        try:
            if (dated := _number_dates(series)) and (not focus or c in focus
                                                     or _TIME_WORDS.search(FOCUS.lower())):
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
                r"(?:%|[A-Za-zµ°/²³]{1,8}\.?)?(?:\+)?"
            )
            dates = written.str.contains(r"\d{1,4}[-/.:]\d{1,2}[-/.:]\d{1,4}|\d:\d\d|"
                                       r"\d{1,2}[ -][A-Z][a-z]{2}[ -]\d{2,4}|"
                                       r"[A-Z][a-z]{2,8} \d{1,2}, \d{4}")
        except Exception:
            continue
        name = repr(str(c))
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
            if fmt and focus and c not in focus and not _TIME_WORDS.search(FOCUS):
                aside.append((c, "dates"))
            elif fmt:
                lines.append(f"  ! {name} holds dates as text (e.g. {written.iloc[0][:20]!r}"
                             + (f", {_other_form(written)!r}" if fmt == "mixed" else "")
                             + f"): df[{name}] = pd.to_datetime(df[{name}]{padded}, "
                             f"format={fmt!r})")
            continue
        odd = texts[~money]
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
        shown = ", ".join(repr(str(c)) for c in whole[:6])
        more = f" and {len(whole) - 6} more" if len(whole) > 6 else ""
        lines.append(f"  ! whole numbers as float64 because of missing values: {shown}{more} "
                     "(.astype(int) fails on NaN: .dropna() first, or .astype('Int64'))")
    if aside:
        shown = ", ".join(f"{str(c)!r} ({what})" for c, what in aside[:8])
        lines.append(f"  other columns hold text to convert: {shown}; the task does not name "
                     "them: leave them as they are unless you use one")
    return lines[:8]

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
            + ", ".join(repr(str(c)) for c in summed[:4]) + f"), not a record: {drop}")

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

def _table(df, label, note):
    rows, cols = df.shape
    head = f"  {label + ': ' if label else ''}{rows} rows x {cols} columns"
    note, *read = note.split("\n")
    lines = [head + (f" ({note})" if note else ""), *read]
    shown = _listed(df)
    more = f", ... {cols - len(shown)} more" if cols > len(shown) else ""
    lines.append("  columns: " + ", ".join(f"{str(c)!r} {df[c].dtype}" for c in shown) + more)
    try:
        lines += _shape_issues(df)
        lines += _na_text_lines(df)
    except Exception:
        pass
    missing = df.isna().sum()
    missing = missing[missing > 0]
    if len(missing):
        parts = [f"{str(c)!r} {int(n)}" for c, n in missing.items()][:MAX_COLS]
        gappy = int(df.isna().any(axis=1).sum())
        lines.append("  missing values: " + ", ".join(parts) + f" ({gappy} of {rows} rows "
                     f"have one)")
    else:
        lines.append("  missing values: none")
    few = _few_values(df, shown)
    if few:
        lines.append("  few distinct values: " + few)
    if rows:
        named = _named(df.columns) if cols > FOCUS_OVER else []
        rows_of = df[named] if named else df
        if named:
            lines.append("  first rows of the columns the task names:")
        head = rows_of.head(ROWS)
        try:  # the labels the rows show: an answer that names one may be read off them
            labels = [v for c in head.columns[:MAX_COLS] for v in head[c] if isinstance(v, str)]
            _NOW.setdefault("shown", []).extend(v.strip() for v in labels if v.strip())
        except Exception:
            pass
        text = head.to_string(max_cols=MAX_COLS, max_colwidth=24, line_width=WIDTH)
        lines += ["  " + line for line in text.splitlines()]
    return lines

def _labels(df):
    """{column: its distinct values} for text columns of at most 30 short values."""
    found = {}
    for c in df.columns[:200]:
        values = _text_values(df[c])
        if values is None:
            continue
        try:
            distinct = values.astype(str).unique()
        except Exception:
            continue
        if 0 < len(distinct) <= 30 and all(len(v) <= 100 for v in distinct):
            found[str(c)] = [str(v) for v in distinct]
    return found

def _is_label(series):
    """A column that names things or counts few cases: text, bool, category or integers."""
    kind = series.dtype.kind
    return kind in "biuO" or str(series.dtype) in ("category", "str", "string")

def _listed(df):
    """The first MAX_COLS columns, then up to EXTRA_COLS later ones the task names or that
    hold a few labels (a wide table's class column is often its last)."""
    first = list(df.columns[:MAX_COLS])
    named = set(_named(df.columns))
    later = []
    for c in df.columns[MAX_COLS:]:
        if len(later) == EXTRA_COLS:
            break
        try:
            label = _is_label(df[c]) and df[c].nunique() <= 20
        except Exception:
            label = False
        if c in named or label:
            later.append(c)
    return first + later

def _few_values(df, columns):
    """The values of text columns with at most FEW of them, e.g. "'Sex' 'female', 'male'"
    (what a filter must match exactly; integer codes are left out: a small model counts
    them for "how many quarters")."""
    if len(df) < 2 * FEW:
        return ""
    parts = []
    for c in columns:
        series = df[c]
        if not (_is_label(series) and series.dtype.kind not in "iu"):
            continue
        try:
            values = series.dropna().unique()
            if not 1 < len(values) <= FEW:
                continue
            plain = [v.item() if hasattr(v, "item") else v for v in values]
            try:
                plain.sort()
            except TypeError:
                plain.sort(key=repr)
            texts = [repr(v) for v in plain]
        except Exception:
            continue
        if max(len(t) for t in texts) > 24:
            continue
        parts.append(f"{str(c)!r} " + ", ".join(texts))
    text = "; ".join(parts)
    return text if len(text) <= 400 else text[:396].rsplit("; ", 1)[0] + "; ..."

def _mentioned(columns):
    """The columns the task names, loosely: as written, or without a bracketed unit, with
    dots and underscores read as spaces, any case ('Delta 15 N' names 'Delta 15 N (o/oo)')."""
    if not FOCUS:
        return []
    task = re.sub(r"[._]+", " ", FOCUS)
    found = []
    for c in columns:
        name = str(c).lower().strip()
        bare = re.sub(r"\s*[(\[][^)\]]*[)\]]\s*$", "", name)
        for key in {name, bare, re.sub(r"[._]+", " ", name), re.sub(r"[._]+", " ", bare)}:
            if len(key) > 1 and re.search(r"(?<![\w])" + re.escape(key) + r"(?![\w])", task):
                found.append(c)
                break
    return found

def _named(columns):
    """The columns the task names, to show rows of a wide table."""
    return _mentioned(columns)[:MAX_COLS]

def _main():
    names = NAMES if NAMES is not None else sorted(  # data files first, then the rest
        (n for n in os.listdir(".") if not n.startswith(".")),
        key=lambda n: (_reader(n) in (None, "text"), n),
    )
    try:
        import pandas as pd
    except ImportError:
        pd = None
    blocks = []
    for name in names:
        try:
            st = os.stat(name)
        except OSError as exc:
            blocks.append([f"{name}: cannot read ({type(exc).__name__})"])
            continue
        if os.path.isdir(name):
            blocks.append([f"{name}/ (directory)"])
            continue
        lines = [f"{name} ({_size(st.st_size)})"]
        kind = _reader(name)
        if kind and pd is not None:
            _NOW.clear()
            try:
                for label, df, note in _frames(pd, name, kind, st.st_size):
                    _NOW.setdefault("columns", []).extend(str(c) for c in df.columns[:500])
                    _NOW.setdefault("values", {}).update(_labels(df))
                    lines += _table(df, label, note)
            except Exception as exc:
                lines.append(f"  not previewed: {type(exc).__name__}: {str(exc)[:120]}")
            if _NOW.get("columns"):
                FACTS[name] = {k: v for k, v in _NOW.items() if not k.startswith("na_")}
        elif kind:
            lines.append("  not previewed: pandas is not installed")
        blocks.append(lines)
    if not blocks:
        return "No files in the work dir."
    out, used = [], 0
    for i, lines in enumerate(blocks):
        block = "\n".join(lines)
        rest = [b[0] for b in blocks[i + 1:]]
        if used + len(block) + 1 <= BUDGET:
            out.append(block)
            used += len(block) + 1
            continue
        tail = f"[preview cut at {BUDGET} characters"
        tail += f"; not shown: {', '.join(rest)}]" if rest else "]"
        if BUDGET - used - len(tail) - 1 < 40:
            tail = "[preview cut]"
        room = BUDGET - used - len(tail) - 1
        if room > 8:
            out.append(block[: room - 4] + " ...")
        out.append(tail)
        break
    return "\n".join(out)[:BUDGET]

def _with_facts():
    import json
    text = _main()
    return text + FACTS_MARK + json.dumps(FACTS) if WITH_FACTS else text
'''
