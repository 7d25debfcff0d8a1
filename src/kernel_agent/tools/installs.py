"""``install_package(name)`` under a policy: the host installs, the kernel imports.

The sandbox has no network, so the host runs ``pip install --target`` into a
per-session directory that the kernel sees read-only on ``sys.path``. The policy,
``--install never|ask|allow:pkg1,pkg2|any`` (default ``never``), decides first;
``ask`` goes through the run's approval callback. Every install is recorded as the
distributions and exact versions that landed in the target, so ``verify`` can put
the same versions into its own fresh target before re-running the notebook.

Names and versions are checked by :mod:`.requirements`, and pip runs through
:mod:`.pip_runner` (wheels only, no secrets, a leased uid in bubblewrap). A notebook's
recorded installs are someone else's request: :func:`check_rerun` puts them under
the same policy before ``verify`` installs anything (:func:`install_pinned`).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ..errors import ConfigError, InstallError
from .pip_runner import run_pip
from .requirements import Pin, parse_pins, parse_request

__all__ = [
    "InstallPolicy",
    "Installer",
    "check_rerun",
    "installed_versions",
    "install_pinned",
    "new_site",
]


def _canonical(name: str) -> str:
    return canonicalize_name(name)


@dataclass(frozen=True)
class InstallPolicy:
    mode: str = "never"  # never | ask | allow | any
    allowed: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> InstallPolicy:
        text = (text or "never").strip()
        if text in ("never", "ask", "any"):
            return cls(text)
        if text.startswith("allow:"):
            names = frozenset(_canonical(n.strip()) for n in text[6:].split(",") if n.strip())
            if names:
                return cls("allow", names)
        raise ConfigError(f"--install must be never, ask, allow:pkg1,pkg2 or any, got {text!r}")

    def __str__(self) -> str:
        if self.mode == "allow":
            return "allow:" + ",".join(sorted(self.allowed))
        return self.mode


def new_site() -> Path:
    """A fresh per-session install target the sandbox uid can read (mode 0755)."""
    path = Path(tempfile.mkdtemp(prefix="kernel-agent-site-"))
    path.chmod(0o755)
    return path


def installed_versions(site: Path) -> dict[str, str]:
    """{distribution name: version} of what ``pip --target`` put into ``site`` (entries
    whose name or version :func:`~.requirements.parse_pins` refuses are left out)."""
    out: dict[str, str] = {}
    for info in sorted(site.glob("*.dist-info")):
        meta = info / "METADATA"
        name = version = None
        try:
            for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("Name:"):
                    name = line[5:].strip()
                elif line.startswith("Version:"):
                    version = line[8:].strip()
                if not line.strip() or (name and version):
                    break
        except OSError:
            continue
        if name and version:
            try:  # a wheel's metadata is the index's word: record only what verify will take
                parse_pins({name: version}, "a wheel's metadata")
            except InstallError:
                continue
            out[name] = version
    return out


async def install_pinned(site: Path, pins: list[Pin], timeout: float = 600.0) -> None:
    """Install exactly ``pins`` (checked, from :func:`check_rerun`) into ``site``, without
    resolving dependencies: the record already lists every distribution that landed."""
    await run_pip(site, pins, timeout, no_deps=True)


Ask = Callable[[str], Awaitable[bool]]


@dataclass
class Installer:
    """Installs into ``site`` under ``policy``; ``ask(name)`` decides under ``ask``."""

    policy: InstallPolicy
    site: Path
    ask: Ask | None = None
    timeout: float = 600.0
    #: every distribution installed so far: {name: version}
    installed: dict[str, str] = field(default_factory=dict)
    #: one pip at a time: each makes the site its uid's while it runs
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def permit(self, request: dict[str, Any]) -> Pin:
        """``request``'s package, checked and permitted by the policy (or :class:`InstallError`)."""
        pin = parse_request(request.get("name", ""))
        await self._permit(pin.requirement, pin.name)
        return pin

    async def install(self, request: dict[str, Any]) -> dict[str, Any]:
        pin = await self.permit(request)
        async with self._lock:
            before = installed_versions(self.site)
            await run_pip(self.site, [pin], self.timeout)
            after = installed_versions(self.site)
        changed = {n: v for n, v in after.items() if before.get(n) != v}
        self.installed.update(changed)
        project = next((n for n in after if _canonical(n) == pin.name), None)
        return {
            "name": project or pin.name,
            "version": after.get(project or "", None),
            "installed": changed,
            "path": str(self.site),
        }

    async def _permit(self, requirement: str, project: str) -> None:
        policy = self.policy
        if policy.mode == "any":
            return
        if policy.mode == "allow" and project in policy.allowed:
            return
        if policy.mode == "ask":
            if self.ask is None:
                raise InstallError(
                    f"install_package({requirement!r}): the install policy is 'ask' and "
                    "there is nobody to ask in this run"
                )
            if await self.ask(requirement):
                return
            raise InstallError(f"install_package({requirement!r}): the user declined")
        how = (
            "run with --install ask, --install allow:NAME or --install any to allow installs"
            if policy.mode == "never"
            else f"the policy allows only {', '.join(sorted(policy.allowed))}"
        )
        raise InstallError(
            f"install_package({requirement!r}) refused by the install policy '{policy}': {how}"
        )


def _listed(pins: list[Pin], most: int = 8) -> str:
    shown = " ".join(p.requirement for p in pins[:most])
    return shown + (f" and {len(pins) - most} more" if len(pins) > most else "")


async def check_rerun(
    installs: Any, policy: InstallPolicy, ask: Ask | None = None, where: str = "the notebook"
) -> list[Pin]:
    """The checked pins of a notebook's ``installs`` that ``policy`` lets ``verify`` install.

    Every entry is checked first (:func:`~.requirements.parse_pins`); then ``never``
    refuses, naming the packages and the flag; ``allow:`` must list every one of them;
    ``ask`` asks once for the whole set (``ask`` gets the requirements, space-separated);
    ``any`` takes them. Refusals are :class:`InstallError` (one line).
    """
    pins = parse_pins(installs, where)
    if not pins or policy.mode == "any":
        return pins
    if policy.mode == "allow":
        others = [p for p in pins if p.name not in policy.allowed]
        if not others:
            return pins
        raise InstallError(
            f"{where} asks to install {_listed(others)}, which --install {policy} does not "
            f"allow: pass --install allow:{','.join(p.name for p in pins)} to install them"
        )
    if policy.mode == "ask":
        if ask is None:
            raise InstallError(
                f"{where} asks to install {_listed(pins)}; the install policy is 'ask' and "
                "there is nobody to ask (no terminal): pass --install allow:NAMES or --install any"
            )
        if await ask(" ".join(p.requirement for p in pins)):
            return pins
        raise InstallError(f"{where} asks to install {_listed(pins)}: declined")
    raise InstallError(
        f"{where} asks to install {_listed(pins)} before it runs, and verify installs "
        f"nothing a notebook names unless told to: pass --install ask, "
        f"--install allow:{','.join(p.name for p in pins)} or --install any "
        "(wheels from your package index, onto this host)"
    )
