"""A two-sample test given two columns where the task compares one column between groups.

Asked to "compare Delta 15 N between the islands Dream and Torgersen with Welch's
t-test", the bundled model filtered Dream and ran ``ttest_ind(d['Delta 15 N (o/oo)'],
d['Flipper Length (mm)'])``: two measures of the same penguins, in other units, so the
p-value printed 0.0 (the eval's tuned half, 2026-12-02 and 2026-12-04). The property: the
task compares something *between* groups with an independent-samples test, and the test's
two samples are two different columns of one frame (the groups are rows, not columns)
that the task does not both name. A paired test (``ttest_rel``, ``wilcoxon``) of two
columns, or a task that names the two columns it compares, is left alone. Pure: the task
and the cell's code.
"""

from __future__ import annotations

import ast
import copy
import re

from .code_text import parse_python

__all__ = ["columns_for_groups", "kept_by_test"]

#: the task compares between groups with a test of independent samples
_BETWEEN = re.compile(r"\bbetween\b", re.I)
_INDEPENDENT_TEST = re.compile(
    r"\bt-?test|\bwelch|\bmann|\bwhitney|\bindependent|\bks\b|kolmogorov|\blevene", re.I
)
_PAIRED = re.compile(r"\bpaired\b|\bbefore and after\b|\brelated\b", re.I)
#: scipy's tests of two independent samples
_TESTS = frozenset(
    {"ttest_ind", "mannwhitneyu", "ranksums", "ks_2samp", "levene", "bartlett", "brunnermunzel"}
)
_SHOWN = 60  # characters of a column name quoted back
_FIXED = 800  # the longest corrected cell quoted back
#: the two groups a task compares: "between the islands Dream and Torgersen"
_GROUPS = re.compile(r"\bbetween\s+(?:the\s+)?(?:[a-z]+\s+)?'?([\w-]+)'?\s+and\s+'?([\w-]+)'?")


def columns_for_groups(task: str, code: str) -> str | None:
    """A note when ``task`` compares between groups and ``code`` runs an independent
    two-sample test on two different columns of one frame; else None."""
    if not (_BETWEEN.search(task) and _INDEPENDENT_TEST.search(task)) or _PAIRED.search(task):
        return None
    tree = parse_python(code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) in _TESTS and len(node.args) >= 2):
            continue
        first, second = _column(node.args[0]), _column(node.args[1])
        if first and second and first[0] == second[0] and first[1] != second[1]:
            if _named(task, first[1]) and _named(task, second[1]):
                continue  # the task compares these two columns
            frame, a, b = first[0][:_SHOWN], first[1][:_SHOWN], second[1][:_SHOWN]
            measure = (
                second[1] if _named(task, second[1]) and not _named(task, first[1]) else first[1]
            )
            head = (
                f"Note: `{_name(node.func)}` here compares two columns of {frame}, {a!r} and "
                f"{b!r}: two measures of the same rows. The task compares one measure between "
                "two groups, and the groups are rows"
            )
            try:
                fixed = _per_group(task, tree, node, measure)
            except RecursionError:  # a filter too deep to write back
                fixed = None
            if fixed:
                told = "take the measure once for each group, and test one against the other"
                return f"{head}: {told}:\n```python\n{fixed}\n```"
            return (
                f"{head}: take the measure once for each group, "
                f"`x = {frame}.loc[{frame}[group_column] == first_group, {a!r}].dropna()` and "
                "`y` the same for the second group (group_column and the groups as the task "
                "names them), then test x against y."
            )
    return None


def _per_group(task: str, tree: ast.Module, test: ast.Call, measure: str) -> str | None:
    """The test rewritten on the measure of each group the task names (``between the
    islands Dream and Torgersen``), where the code selects one of them by a filter: that
    filter, once with each group; None when the code selects neither."""
    groups = _GROUPS.search(task)
    if groups is None:
        return None
    named = (groups[1], groups[2])
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        for compare in ast.walk(node.slice):
            if not (isinstance(compare, ast.Compare) and len(compare.comparators) == 1):
                continue
            value = compare.comparators[0]
            if isinstance(value, ast.Constant) and value.value in named:
                other = named[1] if value.value == named[0] else named[0]
                first = ast.unparse(node.slice)
                value.value = other
                second = ast.unparse(node.slice)
                value.value = named[0] if other == named[1] else named[1]
                call = copy.deepcopy(test)
                call.args[:2] = [ast.Name("x"), ast.Name("y")]
                x, y = (first, second) if other == named[1] else (second, first)
                root = node.value.id
                text = (
                    f"x = {root}[{x}][{measure!r}].dropna()\n"
                    f"y = {root}[{y}][{measure!r}].dropna()\n"
                    f"result = {ast.unparse(call)}\nprint(result)"
                )
                return text if len(text) <= _FIXED else None
    return None


def _named(task: str, column: str) -> bool:
    """Whether ``task`` names ``column`` (its words, case aside)."""
    words = re.sub(r"\s*\(.*?\)", "", column).strip().lower()
    return bool(words) and re.search(rf"(?<!\w){re.escape(words)}(?!\w)", task.lower()) is not None


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _column(node: ast.expr) -> tuple[str, str] | None:
    """``(frame, column)`` for ``f['c']``, ``f.loc[..., 'c']`` or ``f['c'].dropna()``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value  # .dropna(), .astype(float), .values ...
    while isinstance(node, ast.Attribute) and node.attr in ("values", "array"):
        node = node.value
    if not isinstance(node, ast.Subscript):
        return None
    key = node.slice.elts[-1] if isinstance(node.slice, ast.Tuple) else node.slice
    target = node.value
    if isinstance(target, ast.Attribute) and target.attr in ("loc", "iloc"):
        target = target.value
    if isinstance(target, ast.Name) and isinstance(key, ast.Constant):
        if isinstance(key.value, str):
            return target.id, key.value
    return None


def kept_by_test(code: str) -> set[str]:
    """The names that keep what a two-sample test in ``code`` computed: those it assigns,
    and those assigned from them (``p_rounded = round(p, 4)``, ``verdict = ... p ...``)."""
    tree = parse_python(code)
    if tree is None:
        return set()
    kept: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        tested = any(
            isinstance(n, ast.Call) and _name(n.func) in _TESTS for n in ast.walk(node.value)
        )
        if tested or reads & kept:
            kept |= {
                t.id
                for t in ast.walk(node)
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
            }
    return kept
