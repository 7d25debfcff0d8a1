"""``pip install --target`` for names from strangers: wheels only, no secrets, no root.

The names come from the kernel's code or a shared notebook (checked by
:mod:`.requirements`); what pip does with them is bounded here:

- ``--only-binary :all:``: pip never builds an sdist, so no ``setup.py`` or build
  backend of the index's runs on the host (a wheel runs no code when installed);
- ``--`` before the requirements, ``python -I`` (no ``PYTHON*``, no user site, no cwd
  on ``sys.path``), ``--no-input``, ``--no-cache-dir``; the cwd is a scratch dir;
- a short environment: ``PATH``, the locale, ``HOME`` and ``TMPDIR`` in the scratch
  dir, and the ``PIP_*``, proxy and CA settings that say where the index is. No API
  key, token or other secret of the agent's (:func:`pip_environment`). The user's pip
  config files are copied into the scratch ``HOME`` so a mirror keeps working;
- pip itself runs as a leased uid (:mod:`~kernel_agent.sandbox.uids`) when the agent is
  root, inside bubblewrap where the host has it: ``/`` read-only, the network shared
  (pip needs the index), only the target and the scratch dir writable, its own PID,
  IPC and UTS namespaces. The target is the uid's while pip runs and root's again
  (modes 0755/0644) after. :func:`pip_jail` says which of these this host gives.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InstallError
from .requirements import Pin

__all__ = [
    "PipJail",
    "local_paths",
    "pip_argv",
    "pip_environment",
    "pip_jail",
    "run_jailed",
    "run_pip",
]

log = logging.getLogger(__name__)

#: what pip needs of the agent's environment to find the index, by exact name
PIP_NAMES = frozenset(
    {
        "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
        "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_TIMEOUT",
        "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_CONFIG_FILE", "PIP_PRE",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "PATH", "LANG", "LANGUAGE", "TZ",
    }
)  # fmt: skip
#: what pip's jail shows of ``/etc`` beyond the kernel's: the resolver, and the site-wide
#: pip config with the files beside it (a ``constraint =`` there names one); a file it
#: names elsewhere on the host is not in the jail
NETWORK_FILES = ("/etc/resolv.conf", "/etc/pip.conf", "/etc/xdg/pip")
#: a pip config file larger than this is not copied
_MAX_CONFIG = 64 * 1024
#: at most this much of pip's stderr is kept
_MAX_OUTPUT = 256 * 1024


def pip_environment(scratch: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """pip's environment: the index settings of ``base`` (default ``os.environ``), nothing else.

    ``HOME`` and ``TMPDIR`` point into ``scratch``; the user's pip config files (and a
    ``PIP_CONFIG_FILE``) are copied there, since a leased uid cannot read root's home.
    """
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k in PIP_NAMES or k.startswith("LC_")}
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env.update(HOME=str(home), TMPDIR=str(tmp), PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.setdefault("PATH", os.defpath)
    given = env.get("PIP_CONFIG_FILE")
    if given and given != os.devnull:
        copied = _copy_config(Path(given), home / "pip-config-file.conf")
        if copied:
            env["PIP_CONFIG_FILE"] = str(copied)
        else:
            env.pop("PIP_CONFIG_FILE")
    user_home = Path(base.get("HOME") or os.path.expanduser("~"))
    config_home = Path(base.get("XDG_CONFIG_HOME") or user_home / ".config")
    _copy_config(config_home / "pip" / "pip.conf", home / ".config" / "pip" / "pip.conf")
    _copy_config(user_home / ".pip" / "pip.conf", home / ".pip" / "pip.conf")
    return env


#: settings that may name local files or directories pip must read
_PATH_NAMES = ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT",
               "PIP_CLIENT_CERT", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
               "CURL_CA_BUNDLE")  # fmt: skip


def local_paths(env: Mapping[str, str]) -> list[Path]:
    """The existing local paths (plain or ``file://``) that pip's settings in ``env`` name."""
    from urllib.parse import unquote, urlsplit

    out: list[Path] = []
    for name in _PATH_NAMES:
        for value in env.get(name, "").split():
            if value.startswith("file:"):
                value = unquote(urlsplit(value).path)
            if os.path.isabs(value) and os.path.exists(value):
                path = Path(os.path.normpath(value))
                if path not in out:
                    out.append(path)
    return out


def _copy_config(source: Path, dest: Path) -> Path | None:
    """Copy a regular file of at most :data:`_MAX_CONFIG` bytes; None when there is none."""
    try:
        st = source.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_CONFIG:
            return None
        data = source.read_bytes()[:_MAX_CONFIG]
    except OSError:
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    dest.chmod(0o644)
    return dest


def pip_argv(site: Path, pins: Sequence[Pin], no_deps: bool) -> list[str]:
    """The pip command: wheels only, into ``site``, the requirements after ``--``."""
    return [
        sys.executable, "-I", "-m", "pip", "install",
        "--target", str(site),
        "--only-binary", ":all:",
        *(["--no-deps"] if no_deps else []),
        "--no-input", "--no-cache-dir", "--disable-pip-version-check",
        "--no-warn-script-location", "--root-user-action", "ignore", "--upgrade",
        "--",
        *(pin.requirement for pin in pins),
    ]  # fmt: skip


@dataclass(frozen=True)
class PipJail:
    """How pip runs on this host: ``bwrap+uid``, ``bwrap``, ``uid`` (setpriv) or ``plain``."""

    mode: str
    bwrap: str | None = None
    drop: Any = None  # the sandbox's _Drop (setpriv, then an unprivileged bwrap)
    setpriv: str | None = None
    why: str = ""

    @property
    def leases_uid(self) -> bool:
        return self.mode in ("bwrap+uid", "uid")

    def describe(self) -> str:
        return {
            "bwrap+uid": "as a leased uid in bubblewrap (network, only the target writable)",
            "bwrap": "in bubblewrap (network, only the target writable)",
            "uid": "as a leased uid (setpriv, no bubblewrap)",
            "plain": "as this user",
        }[self.mode] + (f"; {self.why}" if self.why else "")

    def wrap(
        self,
        argv: list[str],
        site: Path,
        scratch: Path,
        ids: tuple[int, int] | None,
        ro_paths: Sequence[Path] = (),
    ) -> list[str]:
        """``argv`` inside this jail (``ids``: the leased uid and gid, when it leases one;
        ``ro_paths``: local index dirs and CA files pip is told about, shown read-only)."""
        if self.mode == "plain":
            return argv
        if self.mode == "uid":
            assert self.setpriv is not None and ids is not None
            return [self.setpriv, f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups",
                    "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", *argv]  # fmt: skip
        from ..sandbox.bwrap import binary_paths, filesystem
        from ..sandbox.mounts import interpreter_paths

        assert self.bwrap is not None
        # the kernel's filesystem (nothing of the host's beyond the system and this
        # Python), plus the resolver's and pip's site-wide configuration: pip fetches
        # from its index, which /etc/pip.conf may name
        network = [Path(p) for p in NETWORK_FILES if os.path.lexists(p)]
        ro = [*interpreter_paths(sys.executable), *ro_paths, *network]
        if self.drop is not None and ids is not None:
            namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            inner = self.drop.argv(ids[0], ids[1])
            ro += binary_paths(self.drop.bwrap)
        else:
            namespaces = ["--unshare-all", "--share-net", "--unshare-user", "--disable-userns"]
            inner = []
        return [
            self.bwrap, *filesystem(ro, [site, scratch]), *namespaces,
            "--die-with-parent", "--chdir", str(scratch), "--", *inner, *argv,
        ]  # fmt: skip


@functools.cache
def pip_jail() -> PipJail:
    """The strongest way to run pip this host gives (probed once)."""
    from ..sandbox.bwrap import bwrap_problem

    root = hasattr(os, "geteuid") and os.geteuid() == 0
    problem, bwrap, drop = bwrap_problem()
    if problem is None and bwrap is not None:
        return PipJail("bwrap+uid" if drop is not None else "bwrap", bwrap, drop)
    setpriv = shutil.which("setpriv") if root else None
    if root and setpriv and _readable_by_others(sys.executable):
        return PipJail("uid", setpriv=setpriv, why=f"no bubblewrap: {problem}")
    why = f"no bubblewrap: {problem}" if problem else ""
    if root:
        why += "; the interpreter is not readable by another uid" if setpriv else "; no setpriv"
    return PipJail("plain", why=why.lstrip("; "))


def _readable_by_others(program: str) -> bool:
    from ..sandbox.mounts import can_search, interpreter_paths

    nobody = (65534, set[int]())
    return all(can_search(d, *nobody) for p in interpreter_paths(program) for d in (p, *p.parents))


def _readable_by_uid(path: Path) -> bool:
    """Whether another uid may read ``path`` itself (its ancestors are bound into reach)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    need = 0o005 if stat.S_ISDIR(mode) else 0o004
    return mode & need == need


def _own_tree(root: Path, uid: int, gid: int, normalise: bool) -> None:
    """chown every entry under ``root`` through file descriptors, never following a link
    (:func:`os.fwalk`, ``O_NOFOLLOW``); with ``normalise``, modes become 0755 (dirs,
    executables) or 0644 (other files), dropping setuid, setgid and sticky bits."""

    def fix(name: str, dir_fd: int | None) -> None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:  # a link, a socket: its owner changes, it is not opened
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            return
        try:
            mode = os.fstat(fd).st_mode
            os.fchown(fd, uid, gid)
            if normalise:
                executable = stat.S_ISDIR(mode) or mode & 0o111
                os.fchmod(fd, 0o755 if executable else 0o644)
        finally:
            os.close(fd)

    fix(str(root), None)
    for _, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirs, *files):
            fix(name, dir_fd)


async def run_jailed(
    argv: list[str],
    site: Path,
    timeout: float,
    *,
    jail: PipJail | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int, bytes]:
    """Run ``argv`` as pip runs (:func:`pip_jail`, :func:`pip_environment`, a scratch
    cwd, ``site`` writable); (exit status, the end of its stderr)."""
    from ..sandbox.uids import UidLease, lease_uid

    jail = jail or pip_jail()
    scratch = Path(tempfile.mkdtemp(prefix="kernel-agent-pip-"))
    lease: UidLease | None = None
    owned = False
    try:
        jail_env = pip_environment(scratch, env)
        ids = None
        if jail.leases_uid:
            try:
                lease = lease_uid()
            except OSError as exc:
                raise InstallError(f"no uid to run pip as: {exc}") from None
            ids = (lease.uid, lease.gid)
            for path in local_paths(jail_env):
                if not _readable_by_uid(path):
                    raise InstallError(
                        f"pip runs as an unprivileged uid and cannot read {path}, which the "
                        "pip settings name: make it readable by others (chmod o+rX)"
                    )
            _own_tree(scratch, *ids, normalise=False)
            _own_tree(site, *ids, normalise=False)
            owned = True
        proc = await asyncio.create_subprocess_exec(
            *jail.wrap(argv, site, scratch, ids, local_paths(jail_env)),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=jail_env,
            cwd=scratch,
            start_new_session=True,
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            _kill(proc.pid)
            await proc.wait()
            raise InstallError(f"pip did not finish within {timeout:g} s") from None
        except BaseException:
            _kill(proc.pid)
            raise
        return int(proc.returncode or 0), err[-_MAX_OUTPUT:]
    finally:
        if owned:
            _own_tree(site, os.geteuid(), os.getegid(), normalise=True)
        shutil.rmtree(scratch, ignore_errors=True)
        if lease is not None:
            lease.release()


async def run_pip(
    site: Path,
    pins: Sequence[Pin],
    timeout: float,
    *,
    no_deps: bool = False,
    jail: PipJail | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Install ``pins`` into ``site`` (wheels only); :class:`InstallError` on failure."""
    if not pins:
        return
    status, err = await run_jailed(pip_argv(site, pins, no_deps), site, timeout, jail=jail, env=env)
    if status != 0:
        lines = [ln for ln in err.decode(errors="replace").splitlines() if ln.strip()]
        said = next((ln for ln in reversed(lines) if "ERROR" in ln), lines[-1] if lines else "")
        wanted = " ".join(p.requirement for p in pins)
        raise InstallError(f"pip could not install {wanted} (wheels only): {said.strip()}")


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
