"""``pandas_pitfalls``: a printed value that is not what it looks like gets a note under it.

The pitfalls are :mod:`..pitfalls`' detectors (a row number for a key, all rows for a
count, a fraction for a percentage, another statistic than the named one (a test, a
correlation, or a group's max where its mean was asked), normality read backwards, a
``pd.cut`` edge in the wrong bin, many values in a slot that asks one) and
:mod:`..every_row`'s (a printed count that is every row of what the cell's condition
read), :mod:`..group_alignment`'s (a groupby aggregate combined with a column, row against
group), :mod:`..rate_base`'s (a share of a group out of every row), :mod:`..at_least_one`'s
(rows with at least one of a thing counted as a sum), :mod:`..slot_kind`'s
(a number with a fraction in a slot that asks a count),
:mod:`..missing_rows`' (rows missing any value counted in one column),
:mod:`..stated_rule`'s (a count or fence the task's outlier rule, recomputed in the
kernel, does not give), :mod:`..empty_filter`'s (a condition of the cell's filter that no
row meets, tested again in the kernel, under an empty or zero result: a cell that sends
it again runs with the value as the data writes it, where the kernel found one) and
:mod:`..empty_value`'s (``nan`` or an empty table printed for an answer); this lever
writes the notes, remembers the names that keep a questioned value, and sends an answer
given right after a noted cell back once (and one that states a questioned value later,
or a fraction for a count, or one where no cell selected the rows of a value the task names
and the data holds: :mod:`..named_value`, or that names a label only the preview's first
rows show: :mod:`..preview_label`, or a mean none of whose numbers lies in the range of the
columns it was taken of, as the kernel reported them: :mod:`..value_range`).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ...llm.view import render_cell
from ...prompts import prompt
from ...results import CellResult
from ..answers import FormatSpec
from ..at_least_one import summed_count
from ..dated_filter import dated_condition
from ..empty_filter import empty_filter, filter_probe, refiltered
from ..empty_value import empty_note, empty_value
from ..every_row import every_row_counted
from ..group_alignment import misaligned
from ..missing_rows import one_column_missing
from ..named_value import unused_named_value
from ..pitfalls import (
    GROUPED,
    STATISTIC,
    all_rows_counts,
    asked_column,
    assigned_by,
    cut_edges,
    date_for_period,
    fraction_for_percentage,
    group_statistic_mismatch,
    method_mismatch,
    normality_reversed,
    row_label_calls,
    rows_for_one_value,
    shown_names,
    slot_holds_many,
)
from ..preview_label import preview_label, preview_label_note
from ..rate_base import whole_base
from ..row_product import summed_product
from ..slot_kind import not_a_count
from ..slots import FILLED
from ..state import Ask, TaskState
from ..stated_rule import Recount, recounts_of, rule_note, rule_probe, stated_rule
from ..value_range import ColumnRange, out_of_range, range_note, range_probe, ranges_of
from .base import AskBudget, Lever

__all__ = ["PandasPitfalls"]


#: a statement that divides (it keeps a share a note questioned)
_DIVISION = re.compile(r"(?<![/])/(?![/=])")


class PandasPitfalls(Lever):
    """One of the pitfalls above: a note under the cell (again under a later cell that shows
    a name keeping the noted value); an answer given right after that cell is sent back
    once with the note (small models restate the printed value otherwise)."""

    name = "pandas_pitfalls"
    budget = AskBudget(asks=1, then="accept")

    def forget(self) -> None:
        super().forget()
        #: names that keep a value a note questioned -> that note
        self.noted: dict[str, str] = {}
        #: values a note questioned, as printed -> that note (an answer stating one later)
        self.questioned: dict[str, str] = {}
        #: conditions no row met -> the same with the value as the data writes it
        self.refilter: dict[str, str] = {}
        #: the stated rule, recomputed after the last cell that named its series (a later
        #: cell that prints a count from a kept name is held against it)
        self.recounts: list[Recount] = []
        #: the range of each column a cell took a mean (median, extreme...) of, as the
        #: kernel reported it after that cell
        self.ranges: dict[tuple[str, str], ColumnRange] = {}
        #: a cell printed one value per row where one value was asked (the note says so)
        self.row_values = False

    def check_answer(self, state: TaskState, answer: str) -> Ask | None:
        if state.doubts:
            return Ask(
                prompt("pitfall_answer", note=state.doubts[0]),
                notice="the answer restates a value the last cell's note questions; asking again",
            )
        for value, note in self.questioned.items():
            if re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", answer):
                return Ask(
                    prompt("pitfall_answer_earlier", value=value, note=note),
                    notice="the answer states a value an earlier note questioned; asking for a fix",
                )
        if wrong := not_a_count(state.task, answer):
            return Ask(
                prompt("pitfall_answer_form", note=wrong.note()),
                notice="the answer gives a number with a fraction for a count; asking again",
            )
        if unused := unused_named_value(state.task, state.cells, state.data_facts):
            return Ask(
                prompt("named_value", note=unused.note()),
                notice="the task names a value of the data no cell selected rows by; asking again",
            )
        if label := preview_label(state.task, answer, state.cells, state.data_facts):
            return Ask(
                prompt("preview_label", note=preview_label_note(label, state.task)),
                notice="the answer names a label only the preview's rows show; asking again",
            )
        if outside := out_of_range(state.task, answer, self.ranges):
            return Ask(
                prompt("out_of_range", note=range_note(*outside)),
                notice="the answer states a mean outside the values it is taken of; asking again",
            )
        return None

    def rewrite(self, state: TaskState, code: str) -> tuple[str, str] | None:
        # a condition a note showed meets no row, sent again: run it as the data writes
        # the value (the bundled model re-sent the cell unchanged under the note)
        fixed = refiltered(code, self.refilter)
        if self.row_values:  # `a * b.sum()` sent again under the note: the sum of a product
            fixed = summed_product(fixed if fixed is not None else code) or fixed
        return (fixed, "") if fixed is not None else None

    def probe(self, state: TaskState, code: str) -> dict[str, str]:
        rule = stated_rule(state.task)
        return {
            **(rule_probe(rule, code) if rule else {}),
            **filter_probe(code),
            **range_probe(state.task, code),
        }

    def after_cell(self, state: TaskState, cell: CellResult, hint: str) -> str | None:
        if not cell.ok:
            return None
        if stated_rule(state.task) and (fresh := recounts_of(cell)):
            self.recounts = fresh
        self.ranges.update({(r.frame, r.column): r for r in ranges_of(cell)})
        note = self._note(state, cell)
        if note is None and (again := shown_names(cell.code, set(self.noted))):
            earlier = self.noted[again[0]].removeprefix("Note: ")
            note = f"Note: `{again[0]}` keeps a value an earlier note questioned: {earlier}"
        return note

    def _note(self, state: TaskState, cell: CellResult) -> str | None:
        if labels := row_label_calls(cell.code, state.namespace):
            call, variable, _ = labels[0]
            frames = [v for v in state.namespace.values() if v.columns and v.row_numbers]
            frame = next((v for v in frames if v.name == variable), frames[0] if frames else None)
            column = asked_column(state.task, frame.columns or () if frame else ())
            note = (
                f"Note: `{call}` is a label of {variable}'s index, and that index holds row "
                "numbers (0, 1, 2, ...), so the value printed for it is a row number, not a "
                "value from the data. If the task asks which name, year, date or group, read "
                f"it from that row: `{frame.name if frame else 'df'}.loc[{call}, "
                f"{column!r}]` (or first `.set_index` the column that holds the key)."
            )
            self.noted.update(dict.fromkeys(set().union(*(n for _, _, n in labels)), note))
            return note
        if fraction := fraction_for_percentage(state.task, cell):
            slot, value = fraction
            return (
                f"Note: the task asks for a percentage, and {slot} printed {value}, which "
                "looks like a fraction of 1. A percentage is 100 times the fraction: if "
                f"{value} is a share, print 100 * it."
            )
        if many := slot_holds_many(state.task, cell):
            slot, count, what = many
            return (
                f"Note: the task asks for one value in @{slot}[...], and this cell printed "
                f"{count} values there ({what}: one per row or group), not one. Compute the "
                "one value the task asks for from all of them (over all rows: a sum, a mean, "
                "or one total divided by another), then print only that in the slot."
            )
        if dated := date_for_period(state.task, cell):
            period, date = dated
            return (
                f"Note: the task asks which {period}, and this cell printed a full date "
                f"({date}): its groups are days, not {period}s. Group by the {period} of the "
                f"date column (`df.groupby(df['date column'].dt.{period})`, after "
                "`pd.to_datetime`), then print the one asked."
            )
        if rows := rows_for_one_value(state.task, cell):
            self.row_values = True
            return (
                f"Note: the task asks for one value, and this cell printed {rows} values (a "
                "Series, one per row), not one. Reduce them to the one asked: a total of a "
                "product is `(a * b).sum()` (the parentheses first: `a * b.sum()` multiplies "
                "each row by the whole sum), a mean `.mean()`; then print only that value."
            )
        if paired := misaligned(cell.code):
            note = paired.note()
            self.noted.update(dict.fromkeys(assigned_by(cell.code, GROUPED), note))
            return note
        if share := whole_base(state.task, cell.code):
            note = share.note()
            self.noted.update(dict.fromkeys(assigned_by(cell.code, _DIVISION), note))
            return note
        if summed := summed_count(state.task, cell.code):
            return summed.note()
        if wrong := not_a_count(state.task, render_cell(cell, budget=4000).text):
            return wrong.note()
        if normality_reversed(state.task, cell):
            return (
                "Note: this cell printed whether the normality test's p-value is below the "
                "level, and a p-value below it rejects normality: True there means the data do "
                'NOT look normal. For "looks normal", print `p >= 0.05` (or write yes/no '
                "from it)."
            )
        if edges := cut_edges(state.task, cell.code):
            return f"Note: {edges}"
        if method := method_mismatch(state.task, cell.code):
            note = f"Note: {method}"
            self.noted.update(dict.fromkeys(assigned_by(cell.code, STATISTIC), note))
            return note
        if group := group_statistic_mismatch(state.task, cell.code):
            note = f"Note: {group}"
            self.noted.update(dict.fromkeys(assigned_by(cell.code, GROUPED), note))
            return note
        if counts := all_rows_counts(cell.code, state.namespace):
            call, mask, _ = counts[0]
            note = (
                f"Note: `{call}` counts every row of {mask}, a True/False series, not only "
                f"the rows where it is True. To count those, use `{mask}.sum()`."
            )
            self.noted.update(dict.fromkeys(set().union(*(n for _, _, n in counts)), note))
            return note
        rule = stated_rule(state.task)
        if rule and (recounted := rule_note(state.task, rule, cell, self.recounts)):
            self.questioned[recounted.printed] = recounted.note
            return recounted.note
        if one_column := one_column_missing(state.task, cell.code):
            return one_column
        if counted := every_row_counted(state.task, cell, state.namespace):
            self.questioned[str(counted.whole.count)] = counted.note()
            return counted.note()
        if no_row := empty_filter(cell):
            dates = {c: f for file in state.data_facts.values() for c, f in file.dates.items()}
            if no_row.instead is None and (
                iso := dated_condition(no_row.condition, no_row.column, dates)
            ):
                no_row = replace(no_row, instead=iso, dated=True)
            if no_row.instead:
                self.refilter[no_row.condition] = no_row.instead
            return no_row.note()
        if empty := empty_value(state.task, cell):
            return empty_note(empty)
        asked = set(FormatSpec.of(state.task).slots)
        printed = {name for name, _ in FILLED.findall(render_cell(cell, budget=4000).text)}
        if asked and asked <= printed:  # the answer's values, before they are composed
            cells = state.cells if cell in state.cells else [*state.cells, cell]
            if unused := unused_named_value(state.task, cells, state.data_facts):
                return unused.note()
        return None
