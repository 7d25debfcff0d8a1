"""The code a kernel runs to preview the data files in its cwd, as one source text.

:mod:`.kernel_probe` runs it in a cell or as a ``user_expression`` (in globals of its own,
so it leaves no names), with its settings (``NAMES``, ``BUDGET``, ``FOCUS``...) as those
globals. It is plain Python for whatever pandas the kernel has: it imports nothing from
kernel-agent, which the kernel may not have. For each file: its size, the read call that
works (separator, encoding, decimal comma, lines above the header or below the table, a
blank after each separator, no header line: all sniffed), shape, columns with dtypes, lines
starting with ``!`` naming what will trip code up with the one-line fix (for the columns
the task names; :mod:`.preview_columns` checks them), missing values, few distinct values
and a few rows; and, on ask, the facts it measured as JSON (:mod:`.preview_facts` reads
them on the host).
"""

from __future__ import annotations

from .preview_columns import COLUMNS_SOURCE

__all__ = ["PREVIEW_SOURCE"]

_READING = r'''
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

def _shown(c):
    """A column's name as code writes it: 3 for a file read without a header, else 'name'."""
    return repr(c) if type(c) is int else repr(str(c))

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

def _spaced(path, encoding, sep, skip):
    """Every field after a separator starts with a blank (``a, b, c``: UCI's exports), so
    names and values would keep it: ``skipinitialspace=True`` reads them without."""
    import csv
    if sep in (WHITESPACE, "\t"):
        return False
    with open(path, newline="", encoding=encoding, errors="replace") as fh:
        lines = [ln for ln in fh.read(65536).splitlines()[skip:skip + 40] if ln.strip()][:-1]
    fields = [f for row in csv.reader(lines, delimiter=sep) for f in row[1:] if f]
    return len(fields) >= 4 and sum(f.startswith(" ") for f in fields) >= 0.95 * len(fields)

def _footer(path, encoding, sep, df):
    """How many lines at the file's end are not rows (a source, a note below the table):
    the last non-blank lines, up to 5, of fewer fields than the header, with a letter in
    them, whose first field is no value of the first column (a row that stops early is a
    row)."""
    import csv
    width = len(df.columns)
    if width < 2 or sep == WHITESPACE:
        return 0
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - 8192))
        tail = fh.read().decode(encoding, errors="replace")
    lines = [ln for ln in tail.splitlines()[1:] if ln.strip()]
    first = set(df.iloc[: max(0, len(df) - 6), 0].astype(str).str.strip())
    count = 0
    for row in reversed(list(csv.reader(lines, delimiter=sep))[-6:]):
        if (len(row) >= width or not re.search(r"[A-Za-z]", "".join(row))
                or row[0].strip() in first - {"nan", ""}):
            break
        count += 1
    return count if count <= 5 and count < len(lines) else 0

def _headerless(df):
    """The first line is a row, not a header: every name is a number or a value of its
    own column, some name is a number, and they are not a count (0, 1, 2 ...)."""
    names = [str(c) for c in df.columns]
    number = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:\.\d+)?")
    numbers = [n for n in names if number.fullmatch(n)]
    if len(names) < 2 or not numbers:
        return False
    if len(numbers) == len(names) and all(n.isdigit() for n in names):
        counted = sorted(int(n) for n in names)
        if counted == list(range(counted[0], counted[0] + len(counted))):
            return False
    for c, n in zip(df.columns, names):
        if number.fullmatch(n):
            continue
        try:
            if not (df[c].astype(str).str.strip() == n.strip()).any():
                return False
        except Exception:
            return False
    return True

def _read_call(name, sep, encoding, decimal, skip=0, spaced=False, footer=0, headless=False):
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
    if headless:
        args.append("header=None")
    if spaced:
        args.append("skipinitialspace=True")
    if footer:
        args.append(f"skipfooter={footer}, engine='python'")
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
        spaced = _spaced(path, encoding, sep, skip)
        read = {"sep": sep, "encoding": encoding, "low_memory": False, "nrows": nrows,
                "skiprows": skip, "skipinitialspace": spaced}
        df = pd.read_csv(path, **read)
        headless = _headerless(df)
        if headless:
            read["header"] = None
            df = pd.read_csv(path, **read)
        footer = 0 if big else _footer(path, encoding, sep, df)
        if footer:
            read.pop("low_memory")
            read.update(skipfooter=footer, engine="python")
            df = pd.read_csv(path, **read)
        decimal = sep == ";" and _decimal_comma(df)
        if decimal:
            df = pd.read_csv(path, decimal=",", **read)
        _NOW["read"] = {"sep": sep, "encoding": encoding, "decimal": bool(decimal),
                        "skip": skip, "spaced": spaced, "footer": footer,
                        "headerless": headless}
        call = _read_call(path, sep, encoding, decimal, skip, spaced, footer, headless)
        codes = {}
        try:
            _NOW["na_text"], gaps = _na_text(pd, df, path, read, decimal)
            marks = ["", *gaps]
            _NOW["na_read"] = call[:-1] + f", keep_default_na=False, na_values={marks!r})"
            codes = _codes(df, _NOW["na_text"])
            if codes:  # read as the values they are, and the read call says so
                df = pd.read_csv(path, keep_default_na=False, na_values=marks,
                                 **({"decimal": ","} if decimal else {}), **read)
                _NOW["read"]["kept"] = marks
                call = _NOW["na_read"]
                for c in codes:
                    _NOW["na_text"].pop(c, None)
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
        if spaced:
            note = (note + "; " if note else "") + "a blank after each separator"
        if headless:
            note = ((note + "; " if note else "") + "no header: the first line is a row; "
                    "its columns are 0, 1, 2 ..., or give names=[...]")
        if footer:
            what = "line is not a row" if footer == 1 else f"{footer} lines are not rows"
            note = (note + "; " if note else "") + f"the last {what} but a note below the table"
        if codes:
            held = ", ".join(f"{w!r} in {c!r}" for c, w in list(codes.items())[:3])
            note = ((note + "; " if note else "") + f"{held} is a code like the column's "
                    "others, not a gap")
        if (sep != "," or encoding != "utf-8" or decimal or skip or spaced or headless or footer
                or codes):
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
            if many and not note:  # pd.read_excel alone reads the first sheet only
                note = f"\n  read it with: df = pd.read_excel({path!r}, sheet_name={k!r})"
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
    if not nested:  # one record a line: pd.read_json alone fails on it
        return ("", df, f"one record a line\n  read it with: df = pd.read_json({path!r}, "
                        "lines=True)" if lines else "")
    import json
    with open(path, encoding="utf-8") as fh:
        records = [json.loads(ln) for ln in fh if ln.strip()] if lines else json.load(fh)
    flat = pd.json_normalize(records)
    load = (f"[json.loads(line) for line in open({path!r}) if line.strip()]" if lines
            else f"json.load(open({path!r}))")
    shown = ", ".join(_shown(c) for c in nested[:4])
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
'''

_TABLES = r'''
def _table(df, label, note):
    rows, cols = df.shape
    head = f"  {label + ': ' if label else ''}{rows} rows x {cols} columns"
    note, *read = note.split("\n")
    lines = [head + (f" ({note})" if note else ""), *read]
    shown = _listed(df)
    more = f", ... {cols - len(shown)} more" if cols > len(shown) else ""
    lines.append("  columns: " + ", ".join(f"{_shown(c)} {df[c].dtype}" for c in shown) + more)
    try:
        lines += _shape_issues(df)
        lines += _na_text_lines(df)
    except Exception:
        pass
    try:  # only when the task asks: real data repeats rows (a survey's same answers)
        copies = int(df.duplicated().sum()) if "duplicat" in FOCUS and rows <= 200_000 else 0
    except Exception:  # unhashable cells (lists from JSON)
        copies = 0
    if copies:
        lines.append(f"  duplicate rows: {copies} (the same in every column as a row above; "
                     "df.drop_duplicates() removes them)")
    missing = df.isna().sum()
    missing = missing[missing > 0]
    if len(missing):
        parts = [f"{_shown(c)} {int(n)}" for c, n in missing.items()][:MAX_COLS]
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
        parts.append(f"{_shown(c)} " + ", ".join(texts))
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

#: the whole source the kernel runs: reading each file, checking its columns, the tables
PREVIEW_SOURCE = _READING + COLUMNS_SOURCE + _TABLES
