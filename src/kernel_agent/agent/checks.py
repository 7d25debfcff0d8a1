"""One check of a final answer against the task's words and the values the cells printed.

A small model's wrong answers are often plainly wrong to anyone who reads the task and the
outputs beside them. :func:`answer_problems` is that reader: one pure function fed the
task, the answer, the printed outputs, the row counts of the kernel's frames and the data
preview, returning each problem as one line that says what to do:

- ``magnitude``: a number of 25 digits or more from a data file (a text column summed:
  its strings were joined, not added);
- ``empty``: ``nan``, ``inf`` or an empty result stated as the value (a filter that kept
  no rows, a column of text);
- ``all_rows``: a count of rows that meet a condition equal to the table's row count;
- ``all_zero``: every count asked stated as 0 (a filter that matched nothing);
- ``verdict``: "significant" / "not significant" (or a yes/no slot named so) against the
  one p-value the cells printed (else the one a kernel variable such as ``p_value`` holds)
  and the task's alpha (0.05 when it names none);
- ``no_verdict``: asked whether a result is significant, an answer that does not say;
- ``code_in_slot``: a slot holding code text (``@verdict[significant if p < 0.05 else ...]``);
- ``kind``: a word in a slot whose name asks for a number (``mean_age``, ``count``);
- ``repr``: Python reprs (``np.float64(3.2)``) where a value is to be stated;
- ``repeated_slot``: one asked slot given several times (a list goes in one slot);
- ``preview_copy``: half or more of the answer copied from the data preview.

The ``answer_check`` lever (:mod:`.levers.answer_check`) sends an answer back with the
first problem, each kind at most once a task; the model's next answer is taken. It also
reads a cell that prints ``@name[value]`` lines (the answer's form): a problem there is
noted under the output, so the answer composed from it waits for the model, which reads
the note first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..llm.view import render_cell
from .answers import FormatSpec
from .echo import normalise
from .slots import FILLED
from .state import TaskState

__all__ = ["CHECKS", "Facts", "answer_problems", "facts_of", "table_rows"]

_PREVIEW_HEADER = "Files in the working directory"
_DIGITS = re.compile(r"\d[\d,_]*")
_BIG_ASKED = re.compile(r"factorial|fibonacci|\bdigits?\b|\bpower\b|\*\*|\^|\bbig\b|huge", re.I)
_EMPTY = re.compile(
    r"(?<![\w.])(?:nan|-?inf)(?![\w(])|Empty DataFrame|Series\(\[\]|\[\]|\{\}|@[\w-]+\[\s*\]",
    re.I,
)
_COUNT_ASKED = re.compile(r"\bhow many\b|\bnumber of\b|\bcount\b", re.I)
_CONDITION = re.compile(
    r"outlier|missing|null|\bnan\b|duplicat|above|below|greater|less than|more than|fewer|"
    r"exceed|at least|at most|higher than|lower than|between|over \d|under \d",
    re.I,
)
_ZERO_PLAUSIBLE = re.compile(r"missing|null|\bnan\b|duplicat|empty|negative|zero|invalid", re.I)
_ROWS_ASKED = re.compile(
    r"\brows?\b|records?|entries|observations|samples|data points|size|in (?:the|this) "
    r"(?:file|data|dataset|table)|in total|altogether|overall",
    re.I,
)
_SIGNIFICANCE = re.compile(r"signific|null hypothesis|\breject|p[- ]?value", re.I)
_ALPHA = re.compile(
    r"(?:alpha|α|significance level|level of significance|signific\w*\s+at)\D{0,24}?"
    r"(0?\.\d+|\d+(?:\.\d+)?\s*%)",
    re.I,
)
_P_VALUE = re.compile(
    r"(?:\b(?:p[-_ ]?val(?:ue)?|pvalue|p)\s*(?:[:=]|is)\s*(?:np\.float64\()?"
    r"|@\w*p_?val\w*\[)([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)",
    re.I,
)
_P_NAME = re.compile(
    r"p|pv|pval|p_val|pvalue|p_value|p_val_\w+|p_value_\w+|\w+_p(?:_?value)?", re.I
)
_FLOAT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan")
_NEGATIVE = re.compile(
    r"(?:\bnot|\bno|n't)\b[^.,;]{0,25}\bsignifican|insignificant|"
    r"fail(?:s|ed)?\s+to\s+reject|\b(?:do|does|can)\s*(?:not|n't)\s+reject",
    re.I,
)
_POSITIVE = re.compile(
    r"\b(?:is|are|was|were)\s+(?:statistically\s+)?significant|\breject(?:s|ed)?\s+the\s+null|"
    r"\ba\s+(?:statistically\s+)?significant|\bsignificantly\b",
    re.I,
)
_NUMERIC_SLOT = re.compile(
    r"count|num|mean|avg|average|median|sum|total|pct|percent|ratio|rate|corr|std|var|"
    r"p_?val|min|max|coef|slope|score|r2|rmse|mse|mae|skew|kurt",
    re.I,
)
_NOT_A_NUMBER_WORD = re.compile(r"^(?:yes|no|true|false|none|nan|inf|-inf)$", re.I)
_REPR = re.compile(r"\b(?:np|numpy)\.(?:float|int|str|bool)_?\d*\(|\bTimestamp\('|\bdtype[:=]")
#: a run of this many normalised characters copied from the preview counts
_WINDOW = 40


@dataclass(frozen=True)
class Facts:
    """What the check reads: all plain text, so it is tested with strings."""

    task: str
    answer: str
    #: the printed text of each cell that ran without an error, as the model saw it
    outputs: Sequence[str] = ()
    #: the row counts of the data files' tables (as the preview read them)
    rows: frozenset[int] = field(default_factory=frozenset)
    #: the data preview the task was sent with ("" when there was none)
    preview: str = ""
    #: the kernel's number variables, ``{name: repr}`` (a p-value kept but not printed)
    variables: Mapping[str, str] = field(default_factory=dict)


def _magnitude(f: Facts) -> str | None:
    if not f.preview or _BIG_ASKED.search(f.task):
        return None
    longest = max((len(re.sub(r"\D", "", m)) for m in _DIGITS.findall(f.answer)), default=0)
    if longest < 25:
        return None
    return (
        f"it states a number of {longest} digits, which no sum or mean of this data can "
        "have: a column of text was summed (its strings joined, not added). Convert it "
        "first (`pd.to_numeric(df[c], errors='coerce')`), compute again and print the value"
    )


def _empty(f: Facts) -> str | None:
    if not (m := _EMPTY.search(f.answer)):
        return None
    return (
        f"it states {m.group(0).strip()!r} as a value: the computation had nothing to work on "
        "(a filter that kept no rows, a column of text, a name spelt differently, or missing "
        "values: drop them for the columns used, `df.dropna(subset=['a', 'b'])`). Fix that "
        "step and print the value"
    )


_COUNT_CLAUSE = re.compile(r"(?:how many|number of|count)\b[^?,;]*", re.I)


def _all_zero(f: Facts) -> str | None:
    """Every count asked is 0: a filter that matched nothing (a value written otherwise)."""
    if not f.preview or not _COUNT_ASKED.search(f.task) or _ZERO_PLAUSIBLE.search(f.task):
        return None
    values = [v for _, v in FILLED.findall(f.answer)] or [f.answer]
    numbers = [n for v in values for n in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", v)]
    numbers = [n for n in numbers if n not in re.findall(r"\d+", f.task)]  # 2008: the task's
    if not numbers or any(float(n) != 0 for n in numbers):
        return None
    return (
        "it states 0 for every count: the filter matched no rows. Print a few values of "
        "the column it filters on and match them as the data writes them (dates as text: "
        "pd.to_datetime with the preview's format; other case or spaces in labels)"
    )


def _all_rows(f: Facts) -> str | None:
    # the condition in the clause that asks for the count ("how many are above 3?"), not
    # elsewhere ("What percentage had an affair (> 0), and how many women are in the file?")
    clauses = [c for c in _COUNT_CLAUSE.findall(f.task) if _CONDITION.search(c)]
    if not clauses or len(_COUNT_CLAUSE.findall(f.task)) != len(clauses):
        return None
    if _ROWS_ASKED.search(f.task):
        return None
    given = set(re.findall(r"\d+", f.task))
    numbers = re.findall(r"(?<![\d.,])\d+(?:,\d{3})*(?!\d|[.,]\d)", f.answer)
    stated = {int(n.replace(",", "")) for n in numbers}
    same = sorted(n for n in stated & set(f.rows) if n >= 20 and str(n) not in given)
    if not same:
        return None
    return (
        f"it states {same[0]}, the number of rows of the whole table: the count took every "
        "row, not only those that meet the condition (`len(mask)` and `mask.count()` count "
        "all rows; `mask.sum()` counts the True ones). Count the rows that meet it"
    )


def _alpha(task: str) -> float:
    if m := _ALPHA.search(task):
        text = m.group(1).replace(" ", "")
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    return 0.05


def _verdict(answer: str) -> bool | None:
    """True: the answer says significant; False: not significant; None: it says neither."""
    if _NEGATIVE.search(answer):
        return False
    if _POSITIVE.search(answer):
        return True
    for name, value in FILLED.findall(answer):
        word = value.strip().lower()
        if word in ("significant", "statistically significant"):
            return True
        if re.fullmatch(r"(?:not|non|in)[- ]?(?:statistically )?significant", word):
            return False
        if re.search(r"signific|reject", name, re.I):
            word = value.strip().lower()
            if word in ("yes", "true", "no", "false"):
                return word in ("yes", "true")
    return None


def _verdict_against_p(f: Facts) -> str | None:
    if not _SIGNIFICANCE.search(f.task):
        return None
    printed = {float(v) for text in f.outputs for v in _P_VALUE.findall(text)}
    if not printed:  # a p-value the code kept and compared, or printed a verdict without
        for name, value in f.variables.items():
            if _P_NAME.fullmatch(name) and (m := _FLOAT.search(value)):
                printed.add(float(m.group(0)))
    if len(printed) != 1:
        return None  # none, or several tests: which one the verdict is about is not known
    p = printed.pop()
    if p != p:  # nan: the empty check's
        return None
    verdict = _verdict(f.answer)
    alpha = _alpha(f.task)
    if verdict is None or verdict == (p < alpha):
        return None
    said = "significant" if verdict else "not significant"
    return (
        f"it says {said}, but the printed p-value is {p:g}, which is "
        f"{'below' if p < alpha else 'not below'} {alpha:g}: the result is "
        f"{'significant' if p < alpha else 'not significant'}. State the verdict the p-value gives"
    )


_WHETHER = re.compile(
    r"\b(?:is|are|was|were|does|do|did)\s+there\b[^?.]{0,80}signific|\bwhether\b[^?.]{0,80}"
    r"signific|\b(?:is|are)\s+(?:the|this|it|these)\b[^?.]{0,60}signific",
    re.I,
)


def _verdict_missing(f: Facts) -> str | None:
    """Asked whether something is significant, the answer gives numbers and no verdict."""
    if not _WHETHER.search(f.task) or FILLED.search(f.task) or FILLED.search(f.answer):
        return None
    if _verdict(f.answer) is not None or re.search(r"\b(?:yes|no)\b", f.answer, re.I):
        return None
    return (
        "the task asks whether the result is significant, and the answer does not say: "
        "compare the printed p-value with the task's alpha (0.05 if it names none) and "
        "say yes or no, with the values"
    )


def _kind(f: Facts) -> str | None:
    for name, value in FILLED.findall(f.answer):
        text = value.strip()
        if (
            _NUMERIC_SLOT.search(name)
            and text
            and not re.search(r"\d", text)
            and not _NOT_A_NUMBER_WORD.match(text)
        ):
            return (
                f"@{name}[{text}] holds a word where the slot's name asks for a number: "
                "print the number itself and state it"
            )
    return None


_CODE_TEXT = re.compile(
    r"\bif\b.+\belse\b|[<>]=?\s*[\w.]|==|[{}]|\w\(.*\)|\bdf\[|:\.\d+f|[\w.)]\s*\*\s*[\w.(]"
)


def _code_in_slot(f: Facts) -> str | None:
    for name, value in FILLED.findall(f.answer):
        if _REPR.search(value) or re.fullmatch(r"[\d.,\s%<>=()-]+", value):
            continue  # a repr is the repr check's; a number with a bound is a value
        if _CODE_TEXT.search(value):
            return (
                f"@{name}[{value.strip()[:60]}] holds code text, not its value: compute the "
                "value in the cell (`verdict = 'significant' if p < alpha else 'not "
                f'significant\'`), then print it in braces, print(f"@{name}[{{verdict}}]")'
            )
    return None


def _repr(f: Facts) -> str | None:
    if not (m := _REPR.search(f.answer)):
        return None
    return (
        f"it shows Python reprs ({m.group(0)}...), not values: state each value plainly "
        "(`float(x)`, `int(x)`, `str(x)`), in the form the task asks"
    )


def _repeated_slot(f: Facts) -> str | None:
    asked = FormatSpec.of(f.task).slots
    given = [name for name, _ in FILLED.findall(f.answer)]
    twice = [s for s in asked if given.count(s) > 1 and f"@{s}[" in f.task]
    if not twice or f.task.count(f"@{twice[0]}[") > 1:
        return None
    return (
        f"it gives @{twice[0]}[...] {given.count(twice[0])} times; the task asks for it once: "
        f"put every value in the one slot, comma-separated, @{twice[0]}[a, b, c]"
    )


def _preview_copy(f: Facts) -> str | None:
    text = normalise(f.answer)
    if not f.preview or len(text) < _WINDOW:
        return None
    preview = normalise(f.preview)
    windows = {preview[i : i + _WINDOW] for i in range(len(preview) - _WINDOW + 1)}
    copied = [False] * len(text)
    for i in range(len(text) - _WINDOW + 1):
        if text[i : i + _WINDOW] in windows:
            copied[i : i + _WINDOW] = [True] * _WINDOW
    if sum(copied) < len(text) / 2:
        return None
    return (
        "it copies the data preview you were sent, which is not an answer: compute the "
        "asked values in a cell, print them, and state them"
    )


#: every check, in the order they are asked (the first problem found is sent back)
CHECKS: tuple[tuple[str, Callable[[Facts], str | None]], ...] = (
    ("preview_copy", _preview_copy),
    ("magnitude", _magnitude),
    ("empty", _empty),
    ("verdict", _verdict_against_p),
    ("no_verdict", _verdict_missing),
    ("all_rows", _all_rows),
    ("all_zero", _all_zero),
    ("code_in_slot", _code_in_slot),
    ("kind", _kind),
    ("repr", _repr),
    ("repeated_slot", _repeated_slot),
)


def answer_problems(facts: Facts, skip: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """``[(check, one line)]`` for each problem of ``facts.answer`` (checks in ``skip`` not run)."""
    found = []
    for name, check in CHECKS:
        if name not in skip and (problem := check(facts)):
            found.append((name, problem))
    return found


_TABLE_ROWS = re.compile(r"^\s+(?:sheet .*?: )?(\d+) rows x \d+ columns", re.M)


def table_rows(preview: str) -> frozenset[int]:
    """The row counts of the tables the data preview read (whole files, not a filter's)."""
    return frozenset(int(n) for n in _TABLE_ROWS.findall(preview))


def facts_of(state: TaskState, answer: str) -> Facts:
    """The facts of ``state`` for ``answer``."""
    outputs = [render_cell(c, budget=4000).text for c in state.cells if c.ok]
    preview = next((t for t in state.told if t.startswith(_PREVIEW_HEADER)), "")
    variables = {
        name: info.value
        for name, info in list(state.namespace.items())[:200]
        if info.value is not None and info.type in ("float", "float64", "float32", "int")
    }
    return Facts(state.task, answer, outputs, table_rows(preview), preview, variables)
