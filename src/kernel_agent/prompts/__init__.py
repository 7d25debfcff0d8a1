"""Prompt texts, kept as package data files and filled with ``string.Template``."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template

__all__ = ["prompt", "templates"]


@cache
def _template(name: str) -> Template:
    return Template(files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8"))


def prompt(name: str, **values: object) -> str:
    """The prompt ``name`` (a ``.md`` file in this package) with ``$placeholders`` filled."""
    return _template(name).safe_substitute(**values).strip()


@cache
def templates() -> dict[str, str]:
    """Every prompt's text as written (``$placeholders`` unfilled), by name."""
    names = sorted(p.name[:-3] for p in files(__package__).iterdir() if p.name.endswith(".md"))
    return {name: _template(name).template for name in names}
