"""The final answer in the form the task asks: dates, months, years, roundings, numbers.

A task says how it wants a value written: "on which date (YYYY-MM-DD)", "in which month
(1-12)", "as a four-digit year", "rounded to 2 decimal places". The bundled model often
computes the right value and then writes it otherwise: "April 30, 1992", "December", a
year as the Timestamp ``1980-01-01``, a mean with six decimals, ``np.float64(3.5)``, a
printed 2992 as ``29,92`` (a thousands comma in the wrong place). Each
rewrite here is one value written in the asked form, and exact: nothing that can be read
two ways is touched (``04/05/1992``, two month names, two roundings asked, a p-value
that would round to zero).

Pure: the task, the answer and what the cells printed in, the answer and what changed
out. Bounded: an answer longer than :data:`MAX_CHARS` is left as it is (and only that
much of the printed text is read), and every pattern is linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from .slots import FILLED

__all__ = ["MAX_CHARS", "Reformed", "decimals_asked", "in_asked_form"]

#: the longest answer rewritten (a longer one is no short answer to put in form)
MAX_CHARS = 20_000

_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_MONTH_NUMBER = {name.lower(): i for i, name in enumerate(_MONTHS, 1)}
_MONTH_NUMBER.update({name[:3].lower(): i for i, name in enumerate(_MONTHS, 1)})
_MONTH_NUMBER["sept"] = 9
#: a month's name as prose writes it (capitalised: "may" and "march" are words too)
_MONTH = "(?:" + "|".join([*_MONTHS, "Sept", *(m[:3] for m in _MONTHS)]) + r")(?![A-Za-z])"
_DAY = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>[12]\d{3})"

# ---- what the task asks
_ISO_ASKED = re.compile(r"\bYYYY-MM-DD\b", re.I)
_MONTH_NUMBER_ASKED = re.compile(
    r"\(\s*1\s*[-\u2013]\s*12\s*\)|\bmonth\s+(?:as\s+a\s+)?number\b|\bnumber\s+of\s+the\s+month\b",
    re.I,
)
_YEAR_ASKED = re.compile(
    r"\bfour[- ]digit\s+year\b|\b(?:which|what)\s+(?:\w+\s+){0,2}year\b|\(YYYY\)", re.I
)
_DATE_ASKED = re.compile(r"\b(?:date|day)\b|YYYY-MM", re.I)
_DECIMALS_ASKED = re.compile(
    r"\b(\d|zero|one|two|three|four|five|six)\s+(?:decimal(?:\s+places?|\s+digits?|s)?|dp)\b",
    re.I,
)
_SIGNIFICANT = re.compile(r"\bsignificant\s+(?:figures|digits)\b", re.I)
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

# ---- how the answer writes it
_NUMPY = re.compile(
    r"\b(?:np|numpy)\.(?:u?int|float)\d{0,3}\(\s*([-+]?[\d.]+(?:[eE][-+]?\d+)?)\s*\)"
)
_NUMPY_TEXT = re.compile(r"\b(?:np|numpy)\.str_\(\s*(['\"])([^'\"\n]{0,200})\1\s*\)")
_NUMPY_BOOL = re.compile(r"\b(?:np|numpy)\.(True|False)_")
_TIMESTAMP = re.compile(r"\bTimestamp\(\s*(['\"])([^'\"\n]{1,40})\1\s*\)")
_MIDNIGHT = re.compile(r"\b(\d{4}-\d{2}-\d{2})[ T]00:00:00(?:\.0+)?(?![\d:]|\.\d)")
_MONTH_DAY_YEAR = re.compile(rf"\b(?P<m>{_MONTH})\.?\s+{_DAY},?\s+{_YEAR}\b")
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?(?P<m>{_MONTH})\.?,?\s+{_YEAR}\b")
_SLASHED_ISO = re.compile(r"\b(?P<y>[12]\d{3})/(?P<m>[01]?\d)/(?P<d>[0-3]?\d)\b")
_LONE_MONTH = re.compile(rf"(?<![\w-])(?<!\d )({_MONTH})(?![\w-])(?!\s+\d)")
_ANY_MONTH = re.compile(rf"(?<![\w-])({_MONTH})(?![\w-])")
_JAN_FIRST = re.compile(r"(?<![\w.-])([12]\d{3})-01-01(?![\w:-])")
_YEAR_FLOAT = re.compile(r"(?<![\w.-])([12]\d{3})\.0+(?![\w.])")
_SLOT_DATE = re.compile(r"^\s*([12]\d{3})(?:-\d{2}(?:-\d{2})?|\.0+)\s*$")
#: a whole number whose commas do not group thousands (``29,92``, ``1,0000``); a decimal
#: comma reads so too, so it is rewritten only where a cell printed its digits as one number
_MISGROUPED = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d+)+)(?![\w,]|\.\d)")
#: the longest printed value a left-out slot is filled with
_SLOT_CHARS = 100
#: a printed line that gives one number under a label: ``P-value: 0.7455``, ``mean = 3.2``
_LABELLED_NUMBER = re.compile(
    r"^[ \t]*([A-Za-z][\w.()/-]*(?: [\w.()/-]+){0,4})[ \t]*[:=][ \t]*"
    r"(-?\d{1,15}(?:\.\d{1,20})?(?:[eE][-+]?\d{1,3})?)[ \t]*$",
    re.M,
)
#: how pandas and numpy print no value (a slot printed so fills nothing)
_NO_VALUE = re.compile(r"(?i)(?:np\.float64\()?(?:nan|nat|<na>|none)\)?|\.\.\.|value|integer|name")
_DECIMAL = re.compile(r"(?<![\w.:/-])([-+]?\d+)\.(\d+)(?![\w:/-]|\.\w)")


@dataclass(frozen=True)
class Reformed:
    """``written`` in the answer became ``asked``, for the reason ``why``."""

    written: str
    asked: str
    why: str

    def describe(self) -> str:
        return f"{self.written!r} as {self.asked} ({self.why})"


def in_asked_form(task: str, answer: str, printed: str = "") -> tuple[str, list[Reformed]]:
    """``answer`` with each value written in the form ``task`` asks, and the rewrites
    (``printed``: what the task's cells printed, read for numbers miswritten from it)."""
    if len(answer) > MAX_CHARS or len(task) > MAX_CHARS:
        return answer, []
    done: list[Reformed] = []
    text = _completed(answer, task, printed[-MAX_CHARS:], done)
    text = _named_values_added(text, task, printed[-MAX_CHARS:], done)
    text = _plain_reprs(text, done)
    text = _regrouped(text, printed[-MAX_CHARS:], done)
    if _ISO_ASKED.search(task):
        text = _iso_dates(text, done)
    if _MONTH_NUMBER_ASKED.search(task):
        text = _month_numbers(text, done)
    if _YEAR_ASKED.search(task) or any("year" in n.lower() for n, _ in FILLED.findall(task)):
        text = _years(text, task, done)
    places = decimals_asked(task)
    if len(places) == 1 and not _SIGNIFICANT.search(task):
        text = _rounded(text, task, places.pop(), done)
    return text, done


def decimals_asked(task: str) -> set[int]:
    """The roundings ``task`` asks, in decimal places ("to 2 decimal places", "two dp")."""
    return {int(w) if w.isdigit() else _WORDS[w.lower()] for w in _DECIMALS_ASKED.findall(task)}


def _sub(
    pattern: re.Pattern[str], text: str, done: list[Reformed], why: str,
    repl: Callable[[re.Match[str]], str | None],
) -> str:  # fmt: skip
    """``pattern``'s matches replaced by ``repl`` (None keeps a match), each one noted."""

    def one(m: re.Match[str]) -> str:
        new = repl(m)
        if new is None or new == m.group(0):
            return m.group(0)
        done.append(Reformed(m.group(0), new, why))
        return new

    return pattern.sub(one, text)


def _completed(text: str, task: str, printed: str, done: list[Reformed]) -> str:
    """An answer in asked slots that leaves one out, where a cell printed that slot: the
    slot added, with the value the last cell to print it gave (a slot printed empty or
    as no value is not). The bundled model printed the fence with the count, then fixed
    the count in cells that printed it alone, and answered with the count alone."""
    asked = list(dict.fromkeys(name for name, _ in FILLED.findall(task)))
    given = {name for name, _ in FILLED.findall(text)}
    if not asked or not given & set(asked):
        return text
    printed_last = {name: value.strip() for name, value in FILLED.findall(printed)}
    for name in asked:
        value = printed_last.get(name, "")
        if name in given or not 0 < len(value) <= _SLOT_CHARS or _NO_VALUE.fullmatch(value):
            continue
        slot = f"@{name}[{value}]"
        done.append(Reformed("", slot, "an asked slot the answer left out, as a cell printed it"))
        text = f"{text.rstrip()} {slot}"
    return text


def _named_values_added(text: str, task: str, printed: str, done: list[Reformed]) -> str:
    """A prose answer with no number at all, to a task that names a value a cell printed
    under that name (``P-value: 0.7455`` for "give the p-value ... and a yes/no verdict"):
    the last value printed under each such name added, two at most. The bundled model
    answered the verdict alone, asked again for the values too (scratch, 2026-12-07)."""
    if FILLED.search(task) or re.search(r"\d", text):
        return text
    last = {label.lower(): (label, value) for label, value in _LABELLED_NUMBER.findall(printed)}
    wanted = task.lower()
    named = [
        (label, value)
        for key, (label, value) in last.items()
        if len(key) >= 3 and re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", wanted)
    ][:2]
    for label, value in named:
        added = f"{label}: {value}"
        done.append(Reformed("", added, "a value the task names, as a cell printed it"))
        text = f"{text.rstrip()} ({added})"
    return text


def _regrouped(text: str, printed: str, done: list[Reformed]) -> str:
    """A whole number written with its commas out of place (``29,92``), whose digits a
    cell printed as one number (``2992`` or ``2,992``), written with thousands commas."""
    if "," not in text or not printed:
        return text
    shown = {m.replace(",", "") for m in re.findall(r"(?<![\w.,])\d[\d,]*(?![\w,]|\.\d)", printed)}

    def regroup(m: re.Match[str]) -> str | None:
        written = m.group(1)
        groups = written.split(",")
        if all(len(g) == 3 for g in groups[1:]):
            return None  # thousands grouped as they should be
        digits = "".join(groups)
        if len(digits) > 12 or digits.startswith("0") or digits not in shown:  # +2 at most
            return None
        return f"{int(digits):,}"

    return _sub(_MISGROUPED, text, done, "a number's thousands commas, as printed", regroup)


def _plain_reprs(text: str, done: list[Reformed]) -> str:
    """numpy scalars and pandas Timestamps written as their values, a midnight as its day."""
    text = _sub(_NUMPY, text, done, "a numpy number, as its value", lambda m: m.group(1))
    text = _sub(_NUMPY_TEXT, text, done, "a numpy string, as its text", lambda m: m.group(2))
    text = _sub(_NUMPY_BOOL, text, done, "a numpy bool, as its value", lambda m: m.group(1))
    text = _sub(_TIMESTAMP, text, done, "a Timestamp, as its value", lambda m: m.group(2))
    return _sub(_MIDNIGHT, text, done, "a midnight timestamp, as its day", lambda m: m.group(1))


def _iso(m: re.Match[str]) -> str | None:
    month = m.group("m")
    number = int(month) if month.isdigit() else _MONTH_NUMBER.get(month.lower())
    if number is None:
        return None
    try:
        return date(int(m.group("y")), number, int(m.group("d"))).isoformat()
    except ValueError:
        return None  # no such day: not a date to rewrite


def _iso_dates(text: str, done: list[Reformed]) -> str:
    why = "the task asks YYYY-MM-DD"
    for pattern in (_MONTH_DAY_YEAR, _DAY_MONTH_YEAR, _SLASHED_ISO):
        text = _sub(pattern, text, done, why, _iso)
    return text


def _month_numbers(text: str, done: list[Reformed]) -> str:
    """The one month the answer names, as its number (two names: which one is asked?)."""
    names = {_MONTH_NUMBER.get(m.lower()) for m in _ANY_MONTH.findall(text)}
    if len(names) != 1 or None in names:
        return text
    number = str(names.pop())
    if re.search(rf"(?<![\w.-]){number}(?![\w.-])", text):
        return text  # the number is written already
    return _sub(
        _LONE_MONTH, text, done, "the task asks the month as a number (1-12)",
        lambda m: number,
    )  # fmt: skip


def _years(text: str, task: str, done: list[Reformed]) -> str:
    """A year written as a date or a float: in a slot named for a year; in an answer
    without slots, when the task asks a year and no date (a year as a Timestamp is its
    first of January)."""
    why = "the task asks a year"

    def slot(m: re.Match[str]) -> str | None:
        name, value = m.group(1), m.group(2)
        found = _SLOT_DATE.match(value) if "year" in name.lower() else None
        return f"@{name}[{found.group(1)}]" if found else None

    text = _sub(FILLED, text, done, why, slot)
    if _YEAR_ASKED.search(task) and not _DATE_ASKED.search(task) and not FILLED.search(task + text):
        text = _sub(_JAN_FIRST, text, done, why, lambda m: m.group(1))
        text = _sub(_YEAR_FLOAT, text, done, why, lambda m: m.group(1))
    return text


def _rounded(text: str, task: str, places: int, done: list[Reformed]) -> str:
    """Numbers with more decimals than the one rounding the task asks, rounded to it; not
    one the task writes itself, nor one that would round to zero (a tiny p-value)."""
    in_task = set(_DECIMAL.findall(task))

    def one(m: re.Match[str]) -> str | None:
        if len(m.group(2)) <= places or (m.group(1), m.group(2)) in in_task:
            return None
        value = float(m.group(0))
        if abs(value) < 0.5 * 10.0**-places:
            return None
        return f"{value:.{places}f}"

    return _sub(_DECIMAL, text, done, f"the task asks {places} decimal places", one)
