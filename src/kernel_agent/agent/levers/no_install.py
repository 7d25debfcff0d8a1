"""``no_install``: ``!pip install`` in a kernel that cannot install is refused.

A refused install is a turn without progress: it counts in ``TaskState.stalls``, which
``stall_guard`` acts on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...prompts import prompt
from ..state import Ask, TaskState
from .base import Lever

if TYPE_CHECKING:
    from ...settings import Settings

__all__ = ["NoInstall"]

_INSTALL = re.compile(
    r"^\s*(?:[!%]\s*(?:pip3?|conda|mamba|uv|apt(?:-get)?)\s+(?:pip\s+)?install\b"
    r"|.*\b(?:subprocess|os\.system)\b.*\bpip3?\b.*\binstall\b"
    r"|.*\bpip\.main\(\s*\[\s*['\"]install)",
    re.M,
)


class NoInstall(Lever):
    """``!pip install`` in a kernel that cannot install is refused and names what is there.

    Under an install policy other than ``never`` the model is pointed at
    ``install_package(name)``, which installs on the host under that policy.
    """

    name = "no_install"

    def __init__(self, policy: str = "never") -> None:
        super().__init__()
        self.policy = policy

    @classmethod
    def from_settings(cls, settings: Settings) -> NoInstall:
        return cls(settings.install)

    def before_cell(self, state: TaskState, code: str) -> Ask | None:
        if not _INSTALL.search(code):
            return None
        state.stalls += 1
        have = ", ".join(sorted(state.libraries)) or "the standard library"
        name = "no_install" if self.policy == "never" else "use_install_package"
        return Ask(
            prompt(name, libraries=have, policy=self.policy),
            notice="the model tried to install a package; refused (no network in the kernel)",
            cell_meta={"refused": "install"},
            failure=False,
        )
