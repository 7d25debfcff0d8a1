"""Package names and versions from strangers, checked before pip sees them.

``install_package(...)`` takes its argument from the kernel's code, and ``verify``
takes ``metadata.kernel_agent.installs`` from whoever wrote the notebook: both are
hostile input to a ``pip install`` on the host. Only two shapes get through:

- a project name (PEP 508: letters and digits, with ``.``, ``_`` or ``-`` inside),
  that does not end in an archive suffix (pip takes ``x.tar.gz`` for a file);
- optionally pinned with ``==`` to a version that parses as a PEP 440
  :class:`~packaging.version.Version` and is written with ``[0-9A-Za-z.+!]`` only.

What reaches pip is rebuilt from the parsed parts (the canonical name and the
normalised version), never the string that came in, so nothing starting with
``-``, no URL, path, extra, marker, specifier or newline can reach its command line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import InstallError

__all__ = ["Pin", "parse_request", "parse_pins", "ARCHIVE_SUFFIXES", "MAX_PINS"]

#: PEP 508's name pattern (case-insensitive), bounded in length
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
#: what a version may be written with here (stricter than PEP 440: no ``-``, ``_``, spaces, ``v``)
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!]{0,63}")
#: names pip resolves as files (its ``ARCHIVE_EXTENSIONS``), not as projects
ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz",
                    ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma")  # fmt: skip
#: a notebook may ask for at most this many pinned distributions
MAX_PINS = 200


@dataclass(frozen=True)
class Pin:
    """A checked requirement: a canonical project name, and an exact version or None."""

    name: str
    version: str | None = None

    @property
    def requirement(self) -> str:
        """What goes on pip's command line (after ``--``)."""
        return self.name if self.version is None else f"{self.name}=={self.version}"

    def __str__(self) -> str:
        return self.requirement


def _name(text: str, what: str) -> str:
    if not _NAME.fullmatch(text):
        raise InstallError(f"{what}: {_shown(text)} is not a package name")
    if text.lower().endswith(ARCHIVE_SUFFIXES):
        raise InstallError(f"{what}: {_shown(text)} is a file name, not a package name")
    return canonicalize_name(text)


def _version(text: str, what: str) -> str:
    try:
        if not _VERSION.fullmatch(text):
            raise InvalidVersion(text)
        return str(Version(text))
    except InvalidVersion:
        raise InstallError(f"{what}: {_shown(text)} is not a version") from None


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def parse_request(text: Any) -> Pin:
    """``install_package``'s argument: ``name`` or ``name==version``."""
    if not isinstance(text, str):
        raise InstallError("install_package: the package name must be a string")
    text = text.strip()
    name, sep, version = text.partition("==")
    if not _NAME.fullmatch(name) or (sep and not _VERSION.fullmatch(version)):
        raise InstallError(f"install_package: {_shown(text)} is not a package name")
    return Pin(
        _name(name, "install_package"), _version(version, "install_package") if sep else None
    )


def parse_pins(installs: Any, where: str = "the notebook") -> list[Pin]:
    """``metadata.kernel_agent.installs`` ({name: version}) as checked pins, sorted.

    Every entry must be a valid name with a valid exact version; one bad entry refuses
    the whole set (:class:`InstallError` naming it), as does a set of more than
    :data:`MAX_PINS` or two names that are the same project.
    """
    if installs is None:
        return []
    if not isinstance(installs, Mapping):
        raise InstallError(
            f"{where}: metadata.kernel_agent.installs is not a mapping of name to version"
        )
    if len(installs) > MAX_PINS:
        raise InstallError(
            f"{where} asks for {len(installs)} installs; at most {MAX_PINS} are taken"
        )
    what = f"{where}: metadata.kernel_agent.installs"
    pins: dict[str, Pin] = {}
    for name, version in installs.items():
        if not isinstance(name, str) or not isinstance(version, str):
            raise InstallError(f"{what} holds a name or version that is not a string")
        pin = Pin(_name(name, what), _version(version, what))
        if pin.name in pins:
            raise InstallError(f"{what} names {pin.name!r} twice")
        pins[pin.name] = pin
    return [pins[n] for n in sorted(pins)]
