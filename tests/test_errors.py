"""One error tree: every exception class in the package lives in errors.py, rooted at
KernelAgentError (or Warning; or KeyboardInterrupt for SIGTERM, which must stop a run
wherever Ctrl-C does), and the CLI turns each error into one line."""

from __future__ import annotations

import ast
import builtins
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_agent import errors

SRC = Path(errors.__file__).resolve().parent
#: runs inside the kernel, as text: it cannot import the package
KERNEL_SIDE = SRC / "tools" / "kernel_side.py"

#: the names of the builtin exception and warning classes (the roots a class can derive from)
_BUILTIN = {
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
}


def _base_name(node: ast.expr) -> str:
    """``Error`` for ``Error``, ``mod.Error`` or ``Generic[Error]``'s head; "" otherwise."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def exception_classes() -> list[tuple[Path, str]]:
    """Every class in ``src/kernel_agent`` that derives from an exception, found by reading
    the source: a class whose base is a builtin exception, or (to a fixed point) another
    such class, or a third-party ``...Error``/``...Exception``/``...Warning``."""
    classes: list[tuple[Path, str, list[str]]] = []
    for path in sorted(SRC.rglob("*.py")):
        if path == KERNEL_SIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                classes.append((path, node.name, [_base_name(b) for b in node.bases]))
    known = set(_BUILTIN)
    suffixes = ("Error", "Exception", "Warning")
    found: set[tuple[Path, str]] = set()
    while True:
        more = {
            (path, name)
            for path, name, bases in classes
            if any(b in known or b.endswith(suffixes) for b in bases)
        }
        if more <= found:
            return sorted(found)
        found |= more
        known |= {name for _, name in more}


def test_the_walk_finds_the_tree() -> None:
    """Not vacuous: the walk sees errors.py's own classes, the warning among them."""
    names = {name for path, name in exception_classes() if path.name == "errors.py"}
    assert {"KernelAgentError", "ServiceRefused", "UnsafePath", "UnsandboxedKernelWarning"} <= names
    assert len(names) >= 40


def test_every_exception_class_lives_in_errors_py() -> None:
    outside = [f"{path.relative_to(SRC)}: {name}" for path, name in exception_classes()]
    outside = [o for o in outside if not o.startswith("errors.py:")]
    assert outside == []


def test_every_class_in_errors_py_is_rooted() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)]
    classes = [c for c in classes if c.__module__ == errors.__name__]
    assert len(classes) >= 40
    for cls in classes:
        assert issubclass(cls, errors.KernelAgentError | Warning) or cls is errors.Terminated, cls
        assert cls.__name__ in errors.__all__, cls


def test_the_docstring_tree_names_every_class() -> None:
    documented = errors.__doc__ or ""
    for name in errors.__all__:
        if name != "one_line":
            assert f" {name} " in documented, name


def test_the_two_service_errors_are_told_apart() -> None:
    from kernel_agent import client

    assert client.ServiceRefused is errors.ServiceRefused
    assert not hasattr(client, "ServiceError")
    assert not issubclass(errors.ServiceRefused, errors.ServiceError)


@pytest.mark.parametrize(
    "argv, code",
    [
        (["run", "--max-steps", "0", "--model", "x", "task"], 2),
        (["verify", "missing/no.ipynb"], 6),
        (["export", "missing/no.ipynb", "--to", "html"], 6),
    ],
)
def test_the_cli_says_a_bad_input_in_one_line(argv: list[str], code: int, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_agent", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")},
    )
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernel-agent: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
