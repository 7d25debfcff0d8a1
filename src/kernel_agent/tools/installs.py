"""``install_package(name)`` under a policy: the host installs, the kernel imports.

The sandbox has no network, so the host runs ``pip install --target`` into a
per-session directory that the kernel sees read-only on ``sys.path``. The policy,
``--install never|ask|allow:pkg1,pkg2|any`` (default ``never``), decides first;
``ask`` goes through the run's approval callback. Every install is recorded as the
distributions and exact versions that landed in the target, so ``verify`` can put
the same versions into its own fresh target before re-running the notebook.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InstallError

__all__ = ["InstallPolicy", "Installer", "installed_versions", "install_pinned", "new_site"]

#: a project name, optionally pinned: ``name`` or ``name==1.2``
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(==[A-Za-z0-9.+!_-]+)?$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


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
    """{distribution name: version} of what ``pip --target`` put into ``site``."""
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
            out[name] = version
    return out


async def _pip(site: Path, requirements: list[str], timeout: float) -> None:
    argv = [
        sys.executable, "-m", "pip", "install", "--target", str(site), "--no-input",
        "--disable-pip-version-check", "--no-warn-script-location", "--upgrade", *requirements,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise InstallError(f"pip did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        lines = [ln for ln in err.decode(errors="replace").splitlines() if ln.strip()]
        said = next((ln for ln in reversed(lines) if "ERROR" in ln), lines[-1] if lines else "")
        raise InstallError(f"pip could not install {' '.join(requirements)}: {said.strip()}")


async def install_pinned(site: Path, pins: dict[str, str], timeout: float = 600.0) -> None:
    """Install exactly ``pins`` ({name: version}) into ``site`` (for verify)."""
    if pins:
        await _pip(site, [f"{n}=={v}" for n, v in sorted(pins.items())], timeout)


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

    async def install(self, request: dict[str, Any]) -> dict[str, Any]:
        name = str(request.get("name", "")).strip()
        match = _REQUIREMENT.match(name)
        if not match:
            raise InstallError(f"install_package: {name!r} is not a package name")
        await self._permit(name, _canonical(match.group(1)))
        before = installed_versions(self.site)
        await _pip(self.site, [name], self.timeout)
        after = installed_versions(self.site)
        changed = {n: v for n, v in after.items() if before.get(n) != v}
        self.installed.update(changed)
        project = next((n for n in after if _canonical(n) == _canonical(match.group(1))), None)
        return {
            "name": project or match.group(1),
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
