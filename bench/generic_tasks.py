"""The analysis eval's generic suite: 20 computations with no data file (calendars,
sequences, numeric methods, string puzzles), the kind of question users also ask a
kernel. Every answer is computed here, in plain Python or with scipy, by a route the
question does not dictate (a closed form where the question suggests iteration, and the
reverse), so a right answer is right by any method. Tuned and held-out halves alternate
within each category; the strict scorer is the same.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import date, timedelta

import numpy as np
from analysis_tasks import E, Expected, Task, with_halves
from scipy import optimize

__all__ = ["GENERIC_TASKS"]


# ------------------------------------------------------------------ answers
def _friday_13ths(first: int, last: int) -> int:
    return sum(date(y, m, 13).weekday() == 4 for y in range(first, last + 1) for m in range(1, 13))


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def _primes_below(n: int) -> np.ndarray:
    sieve = np.ones(n, dtype=bool)
    sieve[:2] = False
    for i in range(2, math.isqrt(n) + 1):
        if sieve[i]:
            sieve[i * i :: i] = False
    return np.flatnonzero(sieve)


def _collatz_longest(limit: int) -> tuple[int, int]:
    """The start below ``limit`` with the most steps to reach 1, and its step count."""
    steps = {1: 0}

    def count(n: int) -> int:
        path = []
        while n not in steps:
            path.append(n)
            n = n // 2 if n % 2 == 0 else 3 * n + 1
        total = steps[n]
        for m in reversed(path):
            total += 1
            steps[m] = total
        return total

    best = max(range(1, limit), key=lambda n: (count(n), -n))
    return best, steps[best]


def _square_triangular(k: int) -> int:
    """The k-th positive number that is both a square and triangular (by search)."""
    found, n = 0, 0
    while True:
        n += 1
        t = n * (n + 1) // 2
        if math.isqrt(t) ** 2 == t:
            found += 1
            if found == k:
                return t


def _cos_iterations(x: float, tolerance: float) -> int:
    """Steps of x -> cos(x) until two successive values differ by less than ``tolerance``."""
    steps = 0
    while True:
        steps += 1
        x, before = math.cos(x), x
        if abs(x - before) < tolerance:
            return steps


def _payment(principal: float, annual: float, years: int) -> float:
    r, n = annual / 12, 12 * years
    return principal * r / (1 - (1 + r) ** -n)


def _longest_palindrome(s: str) -> str:
    best = ""
    for i in range(len(s)):
        for j in range(i + len(best) + 1, len(s) + 1):
            if s[i:j] == s[i:j][::-1]:
                best = s[i:j]
    return best


def _arrangements(word: str) -> int:
    total = math.factorial(len(word))
    for n in Counter(word).values():
        total //= math.factorial(n)
    return total


def _caesar(text: str, shift: int) -> str:
    return "".join(
        chr((ord(c) - ord("a") + shift) % 26 + ord("a")) if c.isalpha() else c for c in text.lower()
    )


_WORDS = ["enlist", "google", "inlets", "banana", "silent", "tinsel", "listens", "slient", "tinsle"]
_PALINDROME_TEXT = "forgeeksskeegforabacdfgdcabaracecarxyz"
_CIPHER = "wkh vhfuhw phhwlqj lv dw qrrq"


def _g(answers: list[Expected]):
    return lambda _d: answers


_TASKS: list[Task] = [
    # ---------------------------------------------------------------- calendar
    Task("gen-weekday", "none", "calendar",
         "On which day of the week (Monday to Sunday) does 4 July 2031 fall, and what is its day of the year (1 for 1 January)?",
         _g([E("weekday", date(2031, 7, 4).strftime("%A")), E("day_of_year", date(2031, 7, 4).timetuple().tm_yday, 0)])),
    Task("gen-days-between", "none", "calendar",
         "How many days are there from 20 July 1969 to 27 November 2026 (the second date minus the first), and how many full weeks is that?",
         _g([E("days", (date(2026, 11, 27) - date(1969, 7, 20)).days, 0),
             E("weeks", (date(2026, 11, 27) - date(1969, 7, 20)).days // 7, 0)]), slots=False),
    Task("gen-business-days", "none", "calendar",
         "How many business days (Monday to Friday, no holidays) are there from 1 March 2025 to 30 June 2025, both dates included?",
         _g([E("business_days", int(np.busday_count("2025-03-01", "2025-07-01")), 0)])),
    Task("gen-date-plus", "none", "calendar",
         "Which date (YYYY-MM-DD) is 1000 days after 29 February 2024, and on which day of the week (Monday to Sunday) is it?",
         _g([E("date", (date(2024, 2, 29) + timedelta(days=1000)).isoformat()),
             E("weekday", (date(2024, 2, 29) + timedelta(days=1000)).strftime("%A"))]), slots=False),
    Task("gen-friday-13", "none", "calendar",
         "How many Friday the 13ths are there from 1 January 2000 to 31 December 2030, and how many of them fall in the year 2026?",
         _g([E("fridays", _friday_13ths(2000, 2030), 0), E("in_2026", _friday_13ths(2026, 2026), 0)])),
    # ---------------------------------------------------------------- sequence
    Task("gen-fibonacci", "none", "sequence",
         "With F(1) = F(2) = 1 and F(n) = F(n-1) + F(n-2), what is F(40), and what is the sum F(1) + ... + F(40)?",
         _g([E("f40", _fib(40), 0), E("sum", _fib(42) - 1, 0)])),
    Task("gen-primes", "none", "sequence",
         "How many primes are there below 10000, and what is their sum?",
         _g([E("count", len(_primes_below(10000)), 0), E("sum", int(_primes_below(10000).sum()), 0)]),
         slots=False),
    Task("gen-collatz", "none", "sequence",
         "In the Collatz sequence (n -> n/2 if n is even, else 3n + 1), which starting number below 10000 takes the most steps to reach 1, and how many steps does it take?",
         _g([E("start", _collatz_longest(10000)[0], 0), E("steps", _collatz_longest(10000)[1], 0)])),
    Task("gen-square-triangular", "none", "sequence",
         "Some positive whole numbers are both perfect squares and triangular numbers (1, 36, ...). What is the fifth such number, and what is its square root?",
         _g([E("number", _square_triangular(5), 0), E("root", math.isqrt(_square_triangular(5)), 0)]),
         slots=False),
    Task("gen-power-digits", "none", "sequence",
         "How many decimal digits does 2 to the power 1000 have, and what is the sum of those digits?",
         _g([E("digits", len(str(2**1000)), 0), E("digit_sum", sum(map(int, str(2**1000))), 0)])),
    # ---------------------------------------------------------------- numeric method
    Task("gen-newton", "none", "numeric method",
         "Find the real root of x^3 - 2x - 5 = 0 (for example with Newton's method from x = 2), rounded to 6 decimal places.",
         _g([E("root", optimize.brentq(lambda x: x**3 - 2 * x - 5, 2, 3, xtol=1e-14), 6)]),
         slots=False),
    Task("gen-integral", "none", "numeric method",
         "What is the integral of exp(-x^2) from x = 0 to x = 2, rounded to 6 decimal places?",
         _g([E("integral", math.sqrt(math.pi) / 2 * math.erf(2), 6)])),
    Task("gen-compound", "none", "numeric method",
         "10,000 is invested at 4.5% a year, compounded monthly, for 7 years. What is it worth at the end, and how much interest was earned? Round both to 2 decimal places.",
         _g([E("amount", 10000 * (1 + 0.045 / 12) ** 84), E("interest", 10000 * (1 + 0.045 / 12) ** 84 - 10000)]),
         slots=False),
    Task("gen-loan", "none", "numeric method",
         "A loan of 250,000 is repaid over 30 years in equal monthly payments at 6.25% a year (monthly rate 6.25%/12). What is the monthly payment, and the total interest paid over the 30 years? Round both to 2 decimal places.",
         _g([E("payment", _payment(250000, 0.0625, 30)), E("total_interest", 360 * _payment(250000, 0.0625, 30) - 250000)])),
    Task("gen-fixed-point", "none", "numeric method",
         "Solve cos(x) = x for x (in radians), rounded to 6 decimal places. How many iterations of x -> cos(x) from x = 1 does it take until two successive values differ by less than 1e-10?",
         _g([E("x", optimize.brentq(lambda x: math.cos(x) - x, 0, 1, xtol=1e-14), 6),
             E("iterations", _cos_iterations(1.0, 1e-10), 0)]),
         slots=False),
    Task("gen-minimum", "none", "numeric method",
         "On the interval [0, 5], where does f(x) = x^4 - 3x^3 + 2 take its minimum, and what is the minimum value? Round both to 4 decimal places.",
         _g([E("x", 9 / 4, 4), E("minimum", (9 / 4) ** 4 - 3 * (9 / 4) ** 3 + 2, 4)])),  # f'(x) = x^2 (4x - 9)
    # ---------------------------------------------------------------- string puzzle
    Task("gen-pangram", "none", "string puzzle",
         "In the sentence 'The quick brown fox jumps over the lazy dog', how many vowels (a, e, i, o, u) are there, and which letter occurs most often (ignoring case)?",
         _g([E("vowels", sum(c in "aeiou" for c in "the quick brown fox jumps over the lazy dog"), 0),
             E("letter", Counter(c for c in "the quick brown fox jumps over the lazy dog" if c.isalpha()).most_common(1)[0][0])])),
    Task("gen-palindrome", "none", "string puzzle",
         f"What is the longest palindromic substring of '{_PALINDROME_TEXT}', and how long is it?",
         _g([E("palindrome", _longest_palindrome(_PALINDROME_TEXT)), E("length", len(_longest_palindrome(_PALINDROME_TEXT)), 0)]),
         slots=False),
    Task("gen-anagrams", "none", "string puzzle",
         f"How many of these words are anagrams of 'listen' (same letters, same counts, other than 'listen' itself): {', '.join(_WORDS)}? How many distinct arrangements of the letters of MISSISSIPPI are there?",
         _g([E("anagrams", sum(sorted(w) == sorted("listen") for w in _WORDS), 0), E("arrangements", _arrangements("MISSISSIPPI"), 0)])),
    Task("gen-caesar", "none", "string puzzle",
         f"The text '{_CIPHER}' was encrypted with a Caesar cipher that shifted each letter 3 places forward (a -> d). What is the plain text, and how many letters does it have?",
         _g([E("plain_text", _caesar(_CIPHER, -3)), E("letters", sum(c.isalpha() for c in _CIPHER), 0)]),
         slots=False),
]  # fmt: skip

GENERIC_TASKS: list[Task] = with_halves(
    [
        Task(
            t.id,
            t.dataset,
            t.category,
            t.question,
            t.answers,
            slots=t.slots,
            suite="generic",
            names_file=False,
        )
        for t in _TASKS
    ]  # fmt: skip
)
