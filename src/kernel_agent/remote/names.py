"""What a remote kernel may call a file it hands back: checked before anything is asked for.

Pure. A name comes from the remote side, so it is input from a stranger: a relative
POSIX path in normal form (no ``.``/``..``/empty components, not absolute), no
component starting with ``.`` at any depth (the project's dot-file rule), no control
or invisible formatting characters, bounded length and depth.
"""

from __future__ import annotations

import unicodedata

from ..edges.safefs import split_relative
from ..errors import UnsafePath

__all__ = ["check_name", "MAX_NAME_CHARS", "MAX_COMPONENT_BYTES"]

MAX_NAME_CHARS = 1024
MAX_COMPONENT_BYTES = 255
#: Unicode categories refused in a name: controls, format (bidi overrides, zero-width),
#: surrogates, line and paragraph separators
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def check_name(name: object, *, max_depth: int = 8) -> str:
    """``name`` itself when it is a safe relative path; :class:`UnsafePath` otherwise."""
    if not isinstance(name, str):
        raise UnsafePath(f"not a file name: {name!r:.80}")
    if len(name) > MAX_NAME_CHARS:
        raise UnsafePath(f"a name of {len(name)} characters: {name[:40]!r}...")
    bad = next((c for c in name if unicodedata.category(c) in _REFUSED_CATEGORIES), None)
    if bad is not None:
        raise UnsafePath(f"a control character (U+{ord(bad):04X}) in {name!r:.80}")
    parts = split_relative(name)
    if "/".join(parts) != name:
        raise UnsafePath(f"not in normal form: {name!r:.80}")
    if len(parts) > max_depth:
        raise UnsafePath(f"deeper than {max_depth} directories: {name!r:.80}")
    for part in parts:
        if part.startswith("."):
            raise UnsafePath(f"a dot name ({part!r:.40}) in {name!r:.80}")
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            raise UnsafePath(f"not valid UTF-8: {name!r:.80}") from None
        if size > MAX_COMPONENT_BYTES:
            raise UnsafePath(f"a component of {size} bytes in {name!r:.80}")
    return name
