"""Is a final answer tied to what the cells printed? Numbers it states that no output shows.

Small models sometimes compute the right value and then state another one (their
earlier guess, or a typo of the printed value). The agent asks once for a
correction when an answer's numbers cannot be found in the outputs. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["numbers_in", "ungrounded_numbers"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _canonical(token: str) -> str | None:
    token = token.replace(",", "").replace("_", "").lstrip("+")
    try:
        value = float(token)
    except ValueError:
        return None
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(round(value, 6))


def numbers_in(text: str) -> set[str]:
    """Canonical forms of the numbers in ``text`` (``1,307,674,368,000`` -> ``1307674368000``)."""
    found = set()
    text = text.replace("\u2212", "-")  # a typographic minus sign
    for token in _NUMBER.findall(text):
        canonical = _canonical(token)
        if canonical is not None:
            found.add(canonical)
    return found


def _roundings(number: str) -> set[str]:
    """A printed float also grounds its usual roundings (3.14159 grounds 3.14 and 3.1416)."""
    forms = {number}
    if "." in number:
        value = float(number)
        forms |= {_canonical(f"{value:.{d}f}") or "" for d in range(0, 7)}
    return forms


def ungrounded_numbers(
    answer: str, outputs: Iterable[str], given: str = "", ignore_below: int = 11
) -> list[str]:
    """Numbers in ``answer`` found neither in ``outputs`` nor in ``given`` (the task).

    Small integers (below ``ignore_below``) are ignored: counts and ordinals in prose.
    """
    shown: set[str] = set()
    for text in outputs:
        for number in numbers_in(text):
            shown |= _roundings(number)
    shown |= numbers_in(given)
    missing = []
    for number in sorted(numbers_in(answer)):
        if number in shown:
            continue
        try:
            if abs(float(number)) < ignore_below and float(number).is_integer():
                continue
        except ValueError:
            continue
        missing.append(number)
    return missing
