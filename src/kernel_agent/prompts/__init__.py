"""Prompt texts, kept as package data files and filled with ``string.Template``."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template

__all__ = ["prompt"]


@cache
def _template(name: str) -> Template:
    return Template(files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8"))


def prompt(name: str, **values: object) -> str:
    """The prompt ``name`` (a ``.md`` file in this package) with ``$placeholders`` filled."""
    return _template(name).safe_substitute(**values).strip()
