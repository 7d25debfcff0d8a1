"""Delivery's reading of a kernel's files, without root's powers.

As root, :func:`kernel_agent.edges.delivery.deliver` does not open a path in a sandboxed
kernel's work dir. :func:`pack_as_owner` runs ``python -m kernel_agent.edges.packer`` through
:func:`kernel_agent.sandbox.unprivileged.run_module` as the **owner of the work dir** (the
kernel's own uid: it reads exactly what the kernel could, nothing of root's or of another
kernel's), handing it the work dir as an open directory fd and nothing else. The
worker walks it and writes the zip (the same bounds, the same no-follow reads as
:func:`kernel_agent.edges.archive.pack`) to its stdout, its notes in the zip's comment.

The worker is now the untrusted side. The root side reads its bytes (at most the bounds plus
headers), accepts the archive only if :func:`~kernel_agent.edges.archive.checked_members`
does (names, count, sizes, regular 0644 stored members: no link, no absolute or ``..``
name, no ratio to bomb with), and writes its **own** archive from those members through
:func:`~kernel_agent.edges.archive.pack` (``zipfile`` checks each local header's name against
the directory and each member's CRC). Anything else refuses the whole archive with a note;
nothing is written. ``set_result``'s loose files are then taken from that checked archive.
"""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from ..errors import KernelAgentError, UnsafePath
from .archive import Packed, checked_members, fill, member_name, pack, zip_opener
from .escapes import visible
from .safefs import Walk, walk_beneath

__all__ = ["DeliveryLimits", "owner_to_read_as", "pack_as_owner", "read_archive"]

_MODULE = "kernel_agent.edges.packer"
_MAX_NOTES = 20


@dataclass(frozen=True)
class DeliveryLimits:
    max_files: int = 100
    max_file_bytes: int = 50 * 1024 * 1024
    max_total_bytes: int = 200 * 1024 * 1024
    max_depth: int = 8


def owner_to_read_as(work: Path) -> int | None:
    """The uid to read ``work`` as: its owner, when we are root and it is not; else None
    (read in-process: not root, or a directory root made, such as a gateway's staging)."""
    if os.geteuid() != 0:
        return None
    try:
        owner = os.stat(work, follow_symlinks=False).st_uid
    except OSError:
        return None
    return owner if owner != 0 else None


def pack_as_owner(
    work: Path, uid: int, dest_root: Path, dest_rel: str, limits: DeliveryLimits
) -> tuple[Packed, zipfile.ZipFile | None]:
    """Pack ``work`` as ``uid`` in a worker and write the checked archive at
    ``dest_root/dest_rel``: what was packed, and the checked archive (to take loose files
    from; the caller closes it), None when it was refused or empty."""
    from ..sandbox.unprivileged import run_module

    bound = limits.max_total_bytes + limits.max_files * 4096 + (1 << 20)
    try:
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return Packed(notes=[f"the kernel's files could not be read: {exc.strerror}"]), None
    try:
        data = run_module(
            _MODULE, [str(fd), json.dumps(asdict(limits))], b"", timeout=600.0,
            max_output=bound, purpose="the unprivileged delivery worker", as_uid=uid,
            pass_fds=(fd,),
        )  # fmt: skip
    except KernelAgentError as exc:
        return Packed(notes=[f"the kernel's files could not be read: {exc}"]), None
    finally:
        os.close(fd)
    return read_archive(data, dest_root, dest_rel, limits)


def read_archive(
    data: bytes, dest_root: Path, dest_rel: str, limits: DeliveryLimits
) -> tuple[Packed, zipfile.ZipFile | None]:
    """Check the worker's archive ``data`` and write our own from it (see the module)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = checked_members(
            zf, len(data), max_files=limits.max_files, max_file_bytes=limits.max_file_bytes,
            max_total_bytes=limits.max_total_bytes, max_depth=limits.max_depth,
        )  # fmt: skip
        notes = json.loads(zf.comment.decode("utf-8")) if zf.comment else []
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise UnsafePath("its notes are not a list of lines")
        packed = pack(
            zf, names, dest_root, dest_rel, max_files=limits.max_files,
            max_file_bytes=limits.max_file_bytes, max_total_bytes=limits.max_total_bytes,
            max_depth=limits.max_depth, opener=zip_opener(zf),
        )  # fmt: skip
    except (UnsafePath, zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        why = exc if isinstance(exc, UnsafePath) else f"{type(exc).__name__}: {exc}"
        shown = visible(" ".join(str(why).split()))[:200]  # names in it are the worker's
        return Packed(notes=[f"refused the delivery worker's archive: {shown}"]), None
    # the worker's words: shown, never acted on by a terminal
    packed.notes[:0] = [visible(" ".join(n.split()))[:300] for n in notes[:_MAX_NOTES]]
    return packed, zf


def _work(fd: int, limits: dict[str, int], fh: IO[bytes]) -> None:
    """In the worker: the zip of the work dir at ``fd`` into ``fh`` (its stdout, a pipe),
    the notes in the comment."""
    lim = DeliveryLimits(**limits)
    walk = walk_beneath(fd, max_entries=lim.max_files * 10, max_depth=lim.max_depth, skip_dot=True)
    out = Packed(notes=_walk_notes(walk, lim))
    wanted = []
    for entry in walk.entries:
        if entry.kind != "file":
            continue
        try:
            wanted.append(member_name(entry.path, max_depth=lim.max_depth))
        except UnsafePath as exc:
            out.notes.append(f"refused a name: {exc}")
    fill(fh, fd, wanted, out, max_files=lim.max_files, max_file_bytes=lim.max_file_bytes,
         max_total_bytes=lim.max_total_bytes, comment=_comment)  # fmt: skip


def _comment(out: Packed) -> bytes:
    """The notes, as the comment of the worker's archive (at most 65535 bytes)."""
    return json.dumps([n[:300] for n in out.notes[:_MAX_NOTES]]).encode("utf-8")


def _walk_notes(walk: Walk, limits: DeliveryLimits) -> list[str]:
    notes = []
    if walk.dot_count:
        notes.append(
            f"{walk.dot_count} dot-named path(s), hidden state rather than results: "
            + _some(walk.dot_names, walk.dot_count)
        )
    if walk.too_deep:
        notes.append(f"what is below {limits.max_depth} directory levels: " + _some(walk.too_deep))
    if walk.truncated:
        notes.append(f"everything past the first {limits.max_files * 10} entries")
    return notes


def _some(names: list[str], count: int | None = None, shown: int = 3) -> str:
    count = len(names) if count is None else count
    text = ", ".join(repr(n)[1:-1][:80] for n in names[:shown])
    return text + (f" and {count - shown} more" if count > shown else "")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    _work(int(args[0]), json.loads(args[1]), sys.stdout.buffer)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
