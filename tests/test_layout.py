"""The house's layout, read from the source with ``ast`` (issue #23's rooms).

Few modules at the package top; no import circle, counting imports inside functions; no
module over 600 lines; ``__version__`` read from its own module, never the package face;
no front end reaching into a CLI command; and tests that mirror every sub-package with
three or more modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from crossing import SRC

REPO = SRC.parent
PACKAGE = SRC / "kernel_agent"

MAX_TOP_LEVEL = 12
MAX_LINES = 600


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package), for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


MODULES = _modules()


def _run_time_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that can run, at module level or in a function; not ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield from _run_time_imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _run_time_imports(node)


def _targets(name: str, package: bool, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        here = name.split(".") if package else name.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join(here + ([node.module] if node.module else []))
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, (path, package) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {
            target
            for node in _run_time_imports(tree)
            for target in _targets(name, package, node)
            if target in MODULES and target != name
        }
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_at_most_twelve_modules_at_the_package_top() -> None:
    top = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules at the top: {top}"


def test_no_import_circle_even_through_imports_in_functions() -> None:
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_module_over_600_lines() -> None:
    over = {
        str(path.relative_to(PACKAGE)): n
        for path, _ in MODULES.values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert over == {}


def test_version_is_read_from_its_own_module_never_the_package_face() -> None:
    upward = [
        f"{name}:{node.lineno}"
        for name, (path, package) in MODULES.items()
        if name != "kernel_agent"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and _targets(name, package, node) == {"kernel_agent"}
        and any(alias.name == "__version__" for alias in node.names)
    ]
    assert upward == []


def test_no_module_outside_the_commands_imports_a_command() -> None:
    commands = "kernel_agent.frontends.commands"
    outside = {
        name: sorted(t for t in targets if t.startswith(commands + "."))
        for name, targets in _graph().items()
        if not name.startswith(commands)
    }
    assert {n: t for n, t in outside.items() if t} == {}


def test_tests_mirror_every_subpackage_with_three_modules_or_more() -> None:
    missing = []
    for name, (path, package) in MODULES.items():
        if not package or name == "kernel_agent":
            continue
        modules = [p for p in path.parent.glob("*.py") if p.name != "__init__.py"]
        mirror = REPO / "tests" / path.parent.relative_to(PACKAGE)
        if len(modules) >= 3 and not list(mirror.glob("test_*.py")):
            missing.append(str(mirror.relative_to(REPO)))
    assert missing == []


def test_no_two_test_files_share_a_name() -> None:
    """pytest imports test files by their name (no ``__init__.py`` in tests/)."""
    names = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
