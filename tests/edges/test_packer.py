"""Delivery reads a kernel's work dir as the kernel's uid; root trusts nothing the reader sends.

As root, :func:`kernel_agent.edges.delivery.deliver` of a work dir that a kernel's uid owns
runs the walk and the reads in :mod:`kernel_agent.edges.packer`'s worker, as that uid. The
property tests plant what root could read and the kernel could not (a root-only file beside
and inside the work dir, a hard link to one, a symlink to one, a file swapped for such a
symlink in a loop while delivery runs) and check that none of it reaches the archive. The
root side is tested with hostile archives, as a compromised worker would write them.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import subprocess
import threading
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_agent.edges.delivery import DeliveryLimits, deliver
from kernel_agent.edges.packer import owner_to_read_as, pack_as_owner, read_archive
from kernel_agent.sandbox.uids import drop_argv, lease_uid

SECRET = b"ROOT-ONLY-SECRET-7f3a"
LIMITS = DeliveryLimits(max_files=5, max_file_bytes=1000, max_total_bytes=3000)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch happens only as root")


@pytest.fixture
def kernel_uid() -> Iterator[int]:
    lease = lease_uid()
    try:
        yield lease.uid
    finally:
        lease.release()


def kernel_dir(tmp_path: Path, uid: int) -> tuple[Path, Path]:
    """A root-only parent holding a root-only secret, and a work dir ``uid`` owns (0700)
    with a few of its own files, as a sandboxed kernel's room has."""
    parent = tmp_path / "room"
    parent.mkdir(mode=0o711)
    secret = parent / "secret.csv"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    work = parent / "w"
    work.mkdir(mode=0o700)
    (work / "out").mkdir()
    (work / "out" / "a.csv").write_text("x,y\n1,2\n")
    (work / "mine.csv").write_text("the kernel's own, 0600\n")
    (work / "mine.csv").chmod(0o600)
    for path in [work, *work.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)
    return work, secret


def everything(archive: Path | None) -> bytes:
    if archive is None:
        return b""
    with zipfile.ZipFile(archive) as zf:
        return b"".join(zf.read(n) + n.encode() for n in zf.namelist())


@as_root
def test_the_reader_is_the_kernels_uid_and_gets_nothing_root_only(
    tmp_path: Path, kernel_uid: int
) -> None:
    work, secret = kernel_dir(tmp_path, kernel_uid)
    assert owner_to_read_as(work) == kernel_uid
    # root's own planted files: a 0600 copy inside, a hard link and a symlink to the secret
    (work / "planted.csv").write_bytes(SECRET)
    (work / "planted.csv").chmod(0o600)
    os.link(secret, work / "hard.csv")
    os.symlink(secret, work / "soft.csv")
    os.symlink(secret.parent, work / "up")
    notebook = tmp_path / "nb" / "run.ipynb"
    notebook.parent.mkdir()
    found = deliver(
        work, notebook, declared=["out/a.csv", "planted.csv", "hard.csv", "soft.csv", "mine.csv"]
    )
    assert sorted(found.members) == ["mine.csv", "out/a.csv"]
    assert SECRET not in everything(found.archive)
    assert {p.name for p in found.loose} == {"a.csv", "mine.csv"}
    assert all(SECRET not in p.read_bytes() for p in found.loose)
    assert any("planted.csv" in n for n in found.notes), found.notes
    # control: read in-process as root, the planted files would have come back
    os.chown(work, 0, 0)
    assert owner_to_read_as(work) is None
    root_read = deliver(work, tmp_path / "nb" / "control.ipynb")
    assert SECRET in everything(root_read.archive)
    # nothing was written outside <notebook>_files/
    assert sorted(p.name for p in notebook.parent.iterdir()) == ["control_files", "run_files"]


@as_root
def test_the_kernels_uid_cannot_hard_link_a_root_file(tmp_path: Path, kernel_uid: int) -> None:
    work, secret = kernel_dir(tmp_path, kernel_uid)
    made = subprocess.run(
        [*drop_argv(kernel_uid), "ln", str(secret), str(work / "hard.csv")],
        capture_output=True,
        check=False,
    )
    # protected_hardlinks (or the 0711 parent it cannot list) refuses it; if a system lets
    # it through, the link is still a root-only file the reader cannot open
    found = deliver(work, tmp_path / "run.ipynb")
    assert made.returncode != 0 or "hard.csv" not in found.members
    assert SECRET not in everything(found.archive)


@as_root
def test_a_file_swapped_for_a_link_to_a_root_file_while_delivery_runs(
    tmp_path: Path, kernel_uid: int
) -> None:
    work, secret = kernel_dir(tmp_path, kernel_uid)
    target = work / "race.csv"
    stop = threading.Event()

    def swap() -> None:  # a harmless file, then a hard link or a symlink to the secret
        tmp = work / "race.tmp"
        links = (os.link, os.symlink)
        i = 0
        while not stop.is_set():
            i += 1
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            with contextlib.suppress(OSError):
                if i % 2:
                    tmp.write_bytes(b"harmless\n")
                else:
                    links[i // 2 % 2](secret, tmp)
                os.replace(tmp, target)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        for i in range(20):
            found = deliver(work, tmp_path / f"run{i}.ipynb", declared=["race.csv"])
            assert SECRET not in everything(found.archive)
            assert all(SECRET not in p.read_bytes() for p in found.loose)
    finally:
        stop.set()
        thread.join(5)


@as_root
def test_the_reader_is_not_root_even_when_pointed_at_a_root_file(
    tmp_path: Path, kernel_uid: int
) -> None:
    """Pointed at the work dir's parent (listable), the reader sees the root-only secret
    and its own work dir, and cannot open the secret: it is not root."""
    work, secret = kernel_dir(tmp_path, kernel_uid)
    work.parent.chmod(0o755)
    (tmp_path / "nb").mkdir()
    packed, checked = pack_as_owner(work.parent, kernel_uid, tmp_path / "nb", "x/work.zip", LIMITS)
    assert checked is not None
    checked.close()
    assert sorted(packed.names) == ["w/mine.csv", "w/out/a.csv"]
    assert any("secret.csv" in n and "ermission" in n for n in packed.notes), packed.notes
    assert SECRET not in everything(tmp_path / "nb" / "x" / "work.zip")


# -- the root side: what a compromised reader might send -----------------------------------


def zip_of(members: list[tuple[zipfile.ZipInfo | str, bytes]], comment: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # a duplicate name is the point of one of them
        for info, data in members:
            if isinstance(info, str):
                info = zipfile.ZipInfo(info)
                info.external_attr = 0o100644 << 16
            zf.writestr(info, data)
        zf.comment = comment
    return buf.getvalue()


def member(name: str, mode: int = 0o100644, compress: int = zipfile.ZIP_STORED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("placeholder")
    info.filename = name  # as is: ZipInfo() would normalise a leading slash away
    info.external_attr = mode << 16
    info.compress_type = compress
    return info


def patch_central(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``data`` with a field of its first central directory entry changed."""
    at = data.index(b"PK\x01\x02") + offset
    return data[:at] + struct.pack(fmt, value) + data[at + struct.calcsize(fmt) :]


def patch_local_name(data: bytes, old: bytes, new: bytes) -> bytes:
    at = data.index(old)  # the local header's copy comes first
    return data[:at] + new + data[at + len(new) :]


def bomb() -> bytes:
    """One stored member, then 40 central entries naming that same data (overlapping
    members: a ratio with no compression at all)."""
    data = zip_of([("a000.csv", b"x" * 900)])
    cd_at = data.index(b"PK\x01\x02")
    end_at = data.index(b"PK\x05\x06")
    entry = data[cd_at:end_at]
    entries = b"".join(entry.replace(b"a000", f"a{i:03d}".encode()) for i in range(4))
    end = data[end_at:]
    end = end[:8] + struct.pack("<HHII", 4, 4, len(entries), cd_at) + end[20:]
    return data[:cd_at] + entries + end


HOSTILE = {
    "absolute": zip_of([(member("/etc/cron.d/x"), b"* * * * * root id\n")]),
    "dotdot": zip_of([(member("../../escape.csv"), b"out")]),
    "dotdot-inside": zip_of([(member("a/../../escape.csv"), b"out")]),
    "backslash": zip_of([(member("..\\..\\escape.csv"), b"out")]),
    "symlink": zip_of([(member("link.csv", mode=0o120777), b"/etc/shadow")]),
    "setuid": zip_of([(member("run.sh", mode=0o104755), b"#!/bin/sh\n")]),
    "directory": zip_of([(member("d/", mode=0o40755), b"")]),
    "deflate-bomb": zip_of([(member("z.csv", compress=zipfile.ZIP_DEFLATED), b"\0" * 900)]),
    "too-many": zip_of([(f"f{i}.csv", b"1") for i in range(6)]),
    "twice": zip_of([("a.csv", b"1"), ("a.csv", b"2")]),
    "over-a-file": zip_of([("big.csv", b"x" * 1001)]),
    "over-the-total": zip_of([(f"f{i}.csv", b"x" * 900) for i in range(4)]),
    "huge-declared": patch_central(
        patch_central(zip_of([("a.csv", b"x" * 10)]), 20, "<I", 999), 24, "<I", 999
    ),
    "overlapping": bomb(),
    "local-name-differs": patch_local_name(zip_of([("a.csv", b"x")]), b"a.csv", b"/.csv"),
    "bad-crc": patch_central(zip_of([("a.csv", b"xyz")]), 16, "<I", 12345),
    "not-a-zip": b"PK\x03\x04 nothing else",
    "bad-notes": zip_of([("a.csv", b"1")], comment=b'{"not": "a list"}'),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_archive_from_the_reader_is_refused_and_nothing_is_written(
    tmp_path: Path, name: str
) -> None:
    packed, checked = read_archive(HOSTILE[name], tmp_path, "run_files/work.zip", LIMITS)
    assert checked is None
    assert packed.names == [] and not packed.changed
    assert len(packed.notes) == 1 and "refused the delivery worker's archive" in packed.notes[0]
    written = [p for p in tmp_path.rglob("*") if not p.is_dir()]
    assert written == []
    assert not (tmp_path.parent / "escape.csv").exists()


def test_a_good_archive_from_the_reader_is_written_as_our_own(tmp_path: Path) -> None:
    notes = b'["a note", "\\u001b]52;c;cm0gLXJm\\u0007 and\\nmore \\u202e"]'
    data = zip_of([("out/a.csv", b"1,2\n"), ("b.png", b"png")], comment=notes)
    packed, checked = read_archive(data, tmp_path, "run_files/work.zip", LIMITS)
    assert checked is not None
    checked.close()
    assert packed.names == ["out/a.csv", "b.png"] and packed.changed
    assert packed.notes == ["a note", "\\x1b]52;c;cm0gLXJm\\x07 and more \\u202e"]
    with zipfile.ZipFile(tmp_path / "run_files" / "work.zip") as zf:
        assert zf.read("out/a.csv") == b"1,2\n"
        assert all(i.external_attr >> 16 == 0o100644 for i in zf.infolist())


@as_root
@pytest.mark.parametrize("name", ["absolute", "symlink", "overlapping", "local-name-differs"])
def test_a_real_worker_that_answers_a_hostile_archive_gets_nothing_delivered(
    tmp_path: Path, kernel_uid: int, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path: a real unprivileged process (``python -m base64 -d`` as the kernel's
    uid, in place of the packer) writes the hostile zip into the pipe; ``deliver`` refuses it."""
    import base64

    from kernel_agent.sandbox import unprivileged

    real = unprivileged.run_module

    def hostile(module: str, args: list[str], payload: bytes, **kw: object) -> bytes:
        assert module == "kernel_agent.edges.packer" and kw["as_uid"] == kernel_uid
        return real("base64", ["-d"], base64.b64encode(HOSTILE[name]), **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(unprivileged, "run_module", hostile)
    work, _ = kernel_dir(tmp_path, kernel_uid)
    notebook = tmp_path / "nb" / "run.ipynb"
    notebook.parent.mkdir()
    found = deliver(work, notebook, declared=["out/a.csv"], limits=LIMITS)
    assert found.archive is None and found.members == [] and found.loose == []
    assert "refused the delivery worker's archive" in found.notes[0], found.notes
    assert [p for p in notebook.parent.rglob("*") if not p.is_dir()] == []
    assert not (tmp_path / "etc").exists() and not (tmp_path / "link.csv").exists()
