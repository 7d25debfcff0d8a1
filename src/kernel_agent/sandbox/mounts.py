"""What the sandboxed kernel may see of the filesystem: bwrap mount options.

The kernel's ``/`` is an empty, read-only tmpfs. Into it go only the paths a
:class:`MountPlan` is given: the system directories and a few files of ``/etc``
(:func:`system_paths`), the Python environment the kernel runs
(:func:`interpreter_paths`, :func:`python_paths`), its packages, the user's view and
its own work dir. Everything else of the host (home directories, ``/opt``, ``/srv``,
``/var``, other projects beside the view) is not there to list or read.

Pure path logic, kept apart from the launcher so it can be tested without a kernel.
It changes nothing on the host.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

__all__ = [
    "TMP",
    "PREMOUNTED",
    "ETC_FILES",
    "MountPlan",
    "can_search",
    "interpreter_paths",
    "python_paths",
    "reachable_links",
    "resolve_links",
    "system_paths",
]

#: a fresh tmpfs in every sandbox
TMP = Path("/tmp")
#: mounted by the caller before the plan's binds: the plan makes no directory for them
PREMOUNTED = (Path("/dev"), Path("/proc"), TMP)

#: the system's programs and libraries (a merged-/usr link such as ``/lib`` goes as a link)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: what programs read of ``/etc``: the loader's cache, certificates, fonts, time zone,
#: names of users and groups, name service, MIME types, the alternatives links, locale
#: aliases, terminal and shell set-up. Nothing else of ``/etc`` is shown.
ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl", "ca-certificates", "pki",
    "fonts", "matplotlibrc", "localtime", "timezone", "passwd", "group",
    "nsswitch.conf", "host.conf", "hosts", "gai.conf", "mime.types", "alternatives",
    "protocols", "services", "locale.alias", "inputrc", "bash.bashrc", "terminfo",
    "os-release", "debian_version", "magic",
)  # fmt: skip
#: CPU topology (glibc's and OpenBLAS's core count); no other part of ``/sys``
SYS_PATHS = ("/sys/devices/system/cpu", "/sys/devices/system/node")


def can_search(path: Path, uid: int, gids: set[int]) -> bool:
    """Whether ``uid`` may enter directory ``path`` (mode bits; ACLs ignored)."""
    if uid == 0:
        return True
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def system_paths() -> list[Path]:
    """The system directories and ``/etc`` files this host has (see :data:`ETC_FILES`)."""
    names = [*SYSTEM_DIRS, *(f"/etc/{name}" for name in ETC_FILES), *SYS_PATHS]
    return [Path(p) for p in names if os.path.lexists(p)]


def python_paths() -> list[Path]:
    """This process's Python environment: the venv (``sys.prefix``) and its base."""
    out: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix, os.path.realpath(sys.prefix)):
        for path in (Path(prefix), Path(os.path.realpath(prefix))):
            if path not in out:
                out.append(path)
    return out


def reachable_links(folder: Path, uid: int, gids: set[int], limit: int) -> list[Path]:
    """The symlinks among the first ``limit`` entries of ``folder`` (the user's links to
    data kept elsewhere) whose targets ``uid`` could reach on the host: every directory
    on the way to the real target searchable. The sandbox binds those in; a target behind
    a directory closed to that uid stays out, as on the host."""
    out: list[Path] = []
    try:
        names = sorted(os.listdir(folder))[:limit]
    except OSError:
        return out
    for name in names:
        path = folder / name
        if not path.is_symlink():
            continue
        real = Path(os.path.realpath(path))
        if real.exists() and all(can_search(d, uid, gids) for d in real.parents):
            out.append(path)
    return out


def resolve_links(path: Path, links: dict[Path, str]) -> Path | None:
    """``path`` with every symlink on the way resolved, as the kernel will reach it:
    each link met goes into ``links`` (where it is -> what it says), to be made again
    in the sandbox. None when the path does not exist (or loops)."""
    todo = list(Path(os.path.abspath(path)).parts[1:])
    current = Path("/")
    met: dict[Path, str] = {}
    hops = 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        candidate = current / name
        try:
            st = os.lstat(candidate)
        except OSError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            current = candidate
            continue
        hops += 1
        if hops > 40:
            return None
        target = os.readlink(candidate)
        met[candidate] = target
        parts = list(Path(target).parts)
        if os.path.isabs(target):
            current, parts = Path("/"), parts[1:]
        todo = parts + todo
    links.update(met)
    return current


class MountPlan:
    """bwrap mount options that show the kernel exactly the paths added, on an empty
    ``/`` (bwrap's own tmpfs, which the caller makes read-only after these options).

    Each path is bound at its real place; a symlink on the way to it (``/lib`` ->
    ``usr/lib``, a ``.venv`` link to a shared venv) is made again as a link. A path
    inside another bound one of the same writability needs no bind of its own. The
    directories leading to a bind are made 0755, so the kernel's uid can reach what
    was bound and nothing else: a 0700 ``/root`` holding pyenv shows only pyenv's
    Python. The caller mounts ``/dev``, ``/proc`` and ``/tmp`` (:data:`PREMOUNTED`)
    first; paths under ``/tmp`` are bound into that fresh tmpfs.
    """

    def __init__(self) -> None:
        self.paths: dict[Path, bool] = {}

    def add(self, path: Path, writable: bool) -> None:
        path = Path(os.path.abspath(path))
        self.paths[path] = self.paths.get(path, False) or writable

    def argv(self) -> list[str]:
        links: dict[Path, str] = {}
        wanted: dict[Path, bool] = {}
        for path, writable in self.paths.items():
            real = resolve_links(path, links)
            if real is not None and real != Path("/"):
                wanted[real] = wanted.get(real, False) or writable
        bound: list[tuple[Path, bool]] = []
        for real, writable in sorted(wanted.items(), key=lambda kv: (len(kv[0].parts), kv[0])):
            around = [(b, w) for b, w in bound if b in real.parents]
            if around and max(around, key=lambda bw: len(bw[0].parts))[1] == writable:
                continue  # shown already, as it is
            bound.append((real, writable))
        links = {
            link: target
            for link, target in links.items()
            if not any(b in link.parents for b, _ in bound)  # there already, as on the host
        }
        out: list[str] = []
        made: set[Path] = set()

        def parents(path: Path) -> None:
            for parent in reversed(path.parents[:-1]):  # not "/"
                if parent in made or parent in PREMOUNTED:
                    continue
                if any(b == parent or b in parent.parents for b, _ in bound):
                    continue
                if any(p in parent.parents for p in (Path("/dev"), Path("/proc"))):
                    continue
                out.extend(["--perms", "0755", "--dir", str(parent)])
                made.add(parent)

        for real, writable in bound:
            parents(real)
            out += ["--bind" if writable else "--ro-bind", str(real), str(real)]
        for link, target in sorted(links.items()):
            parents(link)
            out += ["--symlink", target, str(link)]
        return out


def interpreter_paths(program: str) -> list[Path]:
    """The install prefixes a kernel program needs: each hop of its symlink chain,
    and the base Python of a virtualenv (``home`` in ``pyvenv.cfg``)."""
    out: list[Path] = []
    path = Path(os.path.abspath(program))
    for _ in range(40):
        prefix = path.parent.parent if path.parent.name == "bin" else path.parent
        if prefix not in out:
            out.append(prefix)
        cfg = prefix / "pyvenv.cfg"
        if cfg.is_file():
            for line in cfg.read_text(errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    home = Path(value.strip())
                    base = home.parent if home.name == "bin" else home
                    if base not in out:
                        out.append(base)
        if not path.is_symlink():
            break
        path = Path(os.path.normpath(path.parent / os.readlink(path)))
    return out
