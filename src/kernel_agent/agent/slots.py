"""The answer's ``@name[value]`` slots: the one grammar every lever reads them with.

A task may ask for its answer as slots (``@mean_age[value] @verdict[name]``); the model
prints them and answers with them. Before this module the grammar was written seven
times, and the copies had drifted (a value with or without brackets or line breaks, a
name with or without ``-``). The eval's scorer keeps its own copy on purpose: the judge
does not share code with what it judges.
"""

from __future__ import annotations

import re

__all__ = ["CODE_LINE", "FILLED", "NAME", "ONLY_SLOTS", "OPENING", "quoted", "slot_values"]

#: a slot's name
NAME = r"[A-Za-z_][\w-]*"
#: where a slot starts, ``@name[`` (group 1: the name)
OPENING = re.compile(rf"@({NAME})\[")
#: a filled slot on one line, ``@name[value]``, the value without brackets (groups: name, value)
FILLED = re.compile(rf"@({NAME})\[([^\[\]\n]*)\]")
#: a line of nothing but filled slots (and separators between them)
ONLY_SLOTS = re.compile(rf"^(?:@{NAME}\[[^\[\]\n]*\][\s,;.]*)+$")
#: a line of code that is one slot, ``@name[expr]``, which Python reads as a decorator
#: (groups ``indent``, ``name``, ``inner``; the name as Python spells one)
CODE_LINE = re.compile(r"^(?P<indent>[ \t]*)@(?P<name>[A-Za-z_]\w*)\[(?P<inner>.*)\][ \t]*$", re.M)


def slot_values(text: str) -> list[str]:
    """The values of the filled slots in ``text``, in order."""
    return [value for _name, value in FILLED.findall(text)]


#: characters of a printed name or label a note quotes back (the kernel printed it)
QUOTED_CHARS = 60


def quoted(name: str, *, slot: bool) -> str:
    """A printed slot's name (``@name[...]``) or a line's label (```label```) as a note
    quotes it, cut at :data:`QUOTED_CHARS`."""
    name = name.strip()
    name = name if len(name) <= QUOTED_CHARS else name[: QUOTED_CHARS - 3] + "..."
    return f"@{name}[...]" if slot else f"`{name}`"
