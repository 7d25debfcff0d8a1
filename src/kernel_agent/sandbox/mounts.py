"""What the sandboxed kernel may see of the filesystem: bwrap mount options.

Pure path logic, kept apart from the launcher so it can be tested without a kernel.
It changes nothing on the host.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["TMP", "MountPlan", "can_search", "interpreter_paths"]

#: a fresh tmpfs in every sandbox
TMP = Path("/tmp")


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


class MountPlan:
    """bwrap mount options that make a few paths reachable on a read-only ``/``.

    A path whose ancestors the kernel's uid can all enter is already visible; it
    is bound only if it must be writable. A path under a *fresh* directory (``/tmp``,
    and the masked ``/run``, ``/var/tmp``...: empty tmpfs in the sandbox, made by the
    caller, who remounts the masked ones read-only after these options), or under a
    directory the uid cannot enter, is bound into place: the topmost such directory
    becomes an empty tmpfs (read-only once the binds are in), with 0755 directories
    leading to the bound path. A path may be a file (the inner bwrap binary).
    """

    def __init__(
        self, searchable: Callable[[Path], bool], fresh: tuple[Path, ...] = (TMP,)
    ) -> None:
        self.searchable = searchable
        self.fresh = tuple(Path(f) for f in fresh)
        self.paths: dict[Path, bool] = {}

    def add(self, path: Path, writable: bool) -> None:
        path = Path(os.path.abspath(path))
        self.paths[path] = self.paths.get(path, False) or writable

    def _cover(self, path: Path) -> Path | None:
        for fresh in self.fresh:
            if path == fresh or fresh in path.parents:
                return fresh
        for ancestor in reversed(path.parents):
            if not self.searchable(ancestor):
                return ancestor
        return None

    def argv(self) -> list[str]:
        covers: set[Path] = set()
        binds: list[tuple[Path, bool, Path | None]] = []
        for path, writable in sorted(self.paths.items(), key=lambda kv: len(kv[0].parts)):
            cover = self._cover(path)
            inside = [b for b, w, _ in binds if b in path.parents]
            if not writable and (cover is None or inside):
                continue  # visible already, or inside something bound
            binds.append((path, writable, cover))
            if cover is not None and cover not in self.fresh:
                covers.add(cover)
        out: list[str] = []
        for cover in sorted(covers):
            out += ["--perms", "0755", "--tmpfs", str(cover)]
        made: set[Path] = set()
        bound: list[Path] = []
        for path, writable, cover in binds:
            if cover is not None:
                for parent in reversed(path.parents):
                    if cover not in parent.parents or parent in made:
                        continue
                    if any(b == parent or b in parent.parents for b in bound):
                        continue
                    out += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            out += ["--bind" if writable else "--ro-bind", str(path), str(path)]
            bound.append(path)
        for cover in sorted(covers):
            out += ["--remount-ro", str(cover)]
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
