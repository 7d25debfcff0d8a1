"""A value the task names, which the data holds, that no cell selected rows by.

"What is the average price of the Citroën cars?" on a file whose 'Make ' column holds
'Citroën': the bundled model read the file, converted the price, and printed the mean of
every car, in a sentence that names Citroën (scratch, 2026-12-07). The answer looked
grounded. The check holds the task's words against the values the preview found in the
data's text columns (``FileFacts.values``) and against what the cells did with them: a
value is used when some cell's code has it in a string that is not printed text (a
comparison, ``isin``, ``.loc``, a ``groupby`` key spelt out...), or when a cell printed
it at the start of a line (a group of a table). Pure.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..kernel_state.preview_facts import FileFacts
from ..llm.view import render_cell
from ..results import CellResult

__all__ = ["NamedValue", "unused_named_value"]

#: at most this many characters of a value are looked for (a label, not a sentence)
_LONGEST = 60


@dataclass(frozen=True)
class NamedValue:
    """``value`` of ``column``, named by the task (as ``word``, its first word, when the
    task writes only that) and selected by no cell."""

    column: str
    value: str
    word: str = ""

    def note(self) -> str:
        named = f"{self.word!r} ({self.value!r}" if self.word else f"{self.value!r} (a"
        select = (
            f"df[df[{self.column!r}].str.startswith({self.word!r})]"
            if self.word
            else f"df[df[{self.column!r}] == {self.value!r}]"
        )
        return (
            f"Note: the task names {named} value of the column {self.column!r}), but no "
            "cell selected the rows with it, so the value printed is of every row. Select "
            f"those rows first ({select}), keep every other condition the cell had (join "
            "them with &), and compute the value again from them in a new cell."
        )


def unused_named_value(
    task: str, cells: Sequence[CellResult], facts: Mapping[str, FileFacts]
) -> NamedValue | None:
    """The first value of a text column the task names that no cell selected rows by."""
    uses: _Uses | None = None  # read from the cells once, and only if the task names a value
    for file in facts.values():
        for column, values in file.values.items():
            named = [(v, word) for v in values if (word := _named(task, v, values)) is not None]
            if not named or len(named) == len(values):
                continue  # a task that lists every value compares them all
            uses = uses or _Uses.of(cells)
            for value, word in named:
                if not uses.select(value):
                    return NamedValue(column, value, word)
    return None


def _named(task: str, value: str, values: Sequence[str]) -> str | None:
    """How ``task`` names ``value`` (a label with a letter, 3 to 60 characters): ``""`` for
    the whole value, as a word or phrase (:func:`_word_of`); its first word (4 letters or more,
    the first word of no other value) for a longer label ('Adelie' for 'Adelie Penguin
    (Pygoscelis adeliae)'); None when it does not."""
    text = value.strip()
    if not 3 <= len(text) <= _LONGEST or not re.search(r"[^\W\d_]", text):
        return None
    if text.lower() in task.lower() and _word_of(task, text):  # the cheap test first
        return ""
    first = text.split()[0] if " " in text else ""
    if len(first) < 4 or not first.isalpha() or first.lower() not in task.lower():
        return None
    others = [v.strip().split()[0].lower() for v in values if v.strip() and v != value]
    if first.lower() in others or not _word_of(task, first):
        return None
    return first


def _word_of(task: str, text: str) -> bool:
    """``text`` is a word or phrase of ``task`` as the data writes it; a value in capitals
    in any case ('MALE' for "male"), one in small letters also capitalized ('male' for
    "Male passengers"), but a capitalized value not in small letters: "how many are left"
    does not name 'Left' (the held-out survey chain, where W.Hnd holds it). A plural names
    its value, in any case: "the mean age of programmers" names 'programmer', "movies"
    'Movie' (scratch, 2026-12-07: the age of every user, the length of every title, went
    out, and no note came)."""
    for m in re.finditer(rf"(?<!\w)({re.escape(text)})(?:e?s)?(?!\w)", task, re.I):
        written = m.group(1)
        if written == text or text.isupper() or (text.islower() and written.lower() == text):
            return True
        if m.group(0) != written:  # a plural is a noun: "movies" names 'Movie'
            return True
    return False


@dataclass(frozen=True)
class _Uses:
    """What the cells could have selected rows by: the strings of their code that ran that
    are not printed text (lower case), the code of cells that do not parse, and the first
    words of printed lines (a group of a table)."""

    strings: tuple[str, ...]
    unparsed: str
    printed: tuple[str, ...]

    @classmethod
    def of(cls, cells: Sequence[CellResult]) -> _Uses:
        strings: list[str] = []
        unparsed = []
        for cell in cells:
            try:
                tree = ast.parse(cell.code)
            except SyntaxError:
                unparsed.append(cell.code.lower())
                continue
            ran = _ran(tree, cell)
            strings += (s.lower() for s in _selecting_strings(ran))
        printed = [render_cell(cell, budget=4000).text for cell in cells if cell.ok]
        starts = (line.strip().lower() for text in printed for line in text.splitlines())
        return cls(tuple(strings), "\n".join(unparsed), tuple(s[:_LONGEST] for s in starts if s))

    def select(self, value: str) -> bool:
        """Some cell selected rows by ``value`` (its code holds it, or 4 characters or more
        of it, in a string that is not printed text), or printed it first on a line; a cell
        that does not parse counts as using whatever it mentions."""
        key = value.strip().lower()
        return (
            any(key in s or (len(s) >= 4 and s in key) for s in self.strings)
            or key in self.unparsed
            or any(line.startswith(key[:20]) for line in self.printed)  # a table cuts it
        )


#: where a cell's own frame failed, in an IPython traceback: "Cell In[3], line 5"
_FAILED_AT = re.compile(r"Cell In\s?\[\s*\d*\s*\], line (\d+)")


def _ran(tree: ast.Module, cell: CellResult) -> ast.Module:
    """The statements of a cell that ran: all of them, or in a failed cell those that end
    before the line its error names (none, when the traceback names no line of it). A
    scratch join (2026-12-07) filtered by 'Quito' in the line that failed, then dropped the
    filter: that cell selected no rows."""
    if cell.ok:
        return tree
    found = _FAILED_AT.search(cell.error.plain_traceback if cell.error else "")
    line = int(found.group(1)) if found and len(found.group(1)) < 7 else 0
    body = [s for s in tree.body if (s.end_lineno or s.lineno) < line]
    return ast.Module(body=body, type_ignores=[])


def _selecting_strings(tree: ast.AST) -> list[str]:
    """The string constants of ``tree`` but printed text: an f-string's literal parts and a
    string passed to ``print`` as it is (an expression inside either still counts)."""
    text: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text.update(id(part) for part in node.values if isinstance(part, ast.Constant))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and (node.func.id == "print")
        ):
            text.update(id(arg) for arg in node.args if isinstance(arg, ast.Constant))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in text
    ]
