"""``install_package`` on a remote kernel (a gateway's): the host decides, the kernel installs.

A remote kernel's environment is not on this host, so the host cannot ``pip install
--target`` for it. The policy still applies here, before anything reaches the kernel:
the name is checked (:func:`~.requirements.parse_request`: a project name and an exact
version at most, rebuilt from the parsed parts) and permitted by ``--install`` (and the
user, under ``ask``). The host then answers the kernel-side ``install_package`` with pip's
arguments (:func:`remote_pip_args`: wheels only, no input, the requirement after ``--``),
and the kernel runs ``python -I -m pip install --target <its own site>`` in its own
environment (its index settings are the kernel's; the remote side's isolation is the
cluster's job) and puts the site on ``sys.path``.

The kernel reports what landed (op ``installed``). That report is the kernel's word:
only a report for a name the host permitted, not yet reported, is taken, and only that
project's version, checked like a notebook's recorded installs
(:func:`~.requirements.parse_pins`), is recorded; what else pip put there (dependencies)
is not recorded, so a hostile kernel cannot add names for ``verify`` to install.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from ..errors import InstallError
from .requirements import Pin, parse_pins

__all__ = ["RemoteInstalls", "remote_pip_args"]

#: how much of pip's error output the kernel may send back with a failed install
MAX_ERROR_CHARS = 2000


def remote_pip_args(pin: Pin) -> list[str]:
    """pip's arguments after ``install --target SITE`` in the kernel: wheels only."""
    return [
        "--only-binary", ":all:",
        "--no-input", "--no-cache-dir", "--disable-pip-version-check", "--no-color",
        "--no-warn-script-location", "--upgrade",
        "--",
        pin.requirement,
    ]  # fmt: skip


@dataclass
class RemoteInstalls:
    """The installs the host permitted in one remote kernel, awaiting the kernel's report."""

    #: canonical project names permitted and not reported yet
    pending: set[str] = field(default_factory=set)

    def instruct(self, pin: Pin) -> dict[str, Any]:
        """The answer to a permitted ``install_package``: pip's arguments for the kernel."""
        self.pending.add(pin.name)
        return {"name": pin.name, "pip": remote_pip_args(pin)}

    def report(self, request: dict[str, Any]) -> tuple[str, str]:
        """The kernel's report of a finished install: (project, version) to record, or
        :class:`InstallError` (pip failed there, or a report nobody asked for)."""
        name = request.get("name")
        if not isinstance(name, str) or canonicalize_name(name) not in self.pending:
            raise InstallError("install_package: a report of an install the host did not permit")
        project = canonicalize_name(name)
        self.pending.discard(project)
        if request.get("ok") is not True:
            error = str(request.get("error") or "")[-MAX_ERROR_CHARS:].strip()
            last = error.splitlines()[-1] if error else "no output"
            last = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", last)  # no terminal colours
            last = "".join(c for c in last if c.isprintable())
            raise InstallError(f"install_package({project!r}): pip failed in the kernel: {last}")
        installed = request.get("installed")
        if not isinstance(installed, dict) or len(installed) > 1000:
            raise InstallError("install_package: a malformed report from the kernel")
        found = [(n, v) for n, v in installed.items() if canonicalize_name(str(n)) == project]
        if len(found) != 1:
            raise InstallError(f"install_package({project!r}): the kernel reports no such install")
        pins = parse_pins(dict(found), "the kernel's install report")
        return pins[0].name, str(pins[0].version)
