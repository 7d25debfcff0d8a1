"""The host's archive of a kernel's files: safe member names, regular files only, bounded."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from kernel_agent.edges.archive import member_name, members_of, pack
from kernel_agent.errors import UnsafePath

BOUNDS = dict(max_files=100, max_file_bytes=1000, max_total_bytes=5000)


@pytest.mark.parametrize(
    "name",
    [
        "../x", "a/../../x", "/etc/cron.d/x", "//x", "a//b", "./a", "a/./b", "a/", "",
        "a\x00b", "a\nb", "report\r.csv", "\x1b[31mred", "a\u202eb", "zero\u200bwidth",
        "bad\udcff", "..\\..\\x", "a\\b", "x" * 300, "/".join(["d"] * 9 + ["f"]),
        "a/" + "b" * 256, None, 3,
    ],
)  # fmt: skip
def test_member_name_refuses_hostile_names(name: object) -> None:
    with pytest.raises(UnsafePath):
        member_name(name)


@pytest.mark.parametrize("name", ["out.csv", "a/b/c.png", "résumé.md", "-x", "HEAD", ".envrc"])
def test_member_name_keeps_plain_names(name: str) -> None:
    assert member_name(name) == name


def test_pack_writes_regular_0644_members_and_refuses_what_is_not(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "sub").mkdir(parents=True)
    dest.mkdir()
    (src / "out.csv").write_text("a,b\n" * 50)
    (src / "sub" / "r.bin").write_bytes(os.urandom(300))
    (src / "suid").write_bytes(b"x")
    (src / "suid").chmod(0o4755)
    (src / "link").symlink_to("/etc/passwd")
    (src / "big").write_bytes(b"0" * 1001)
    os.mkfifo(src / "fifo")
    names = ["out.csv", "sub/r.bin", "suid", "link", "big", "fifo", "../x", "a\nb", "nothere"]
    packed = pack(src, names, dest, "w.zip", **BOUNDS)
    assert packed.names == ["out.csv", "sub/r.bin", "suid"] and packed.changed
    assert len(packed.notes) == 6 and any("big (1001 bytes)" in n for n in packed.notes)
    with zipfile.ZipFile(dest / "w.zip") as zf:
        for info in zf.infolist():
            assert info.external_attr >> 16 == stat.S_IFREG | 0o644
        assert zf.read("out.csv") == b"a,b\n" * 50
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_STORED}
        zf.extractall(tmp_path / "x")
    extracted = sorted(
        p.relative_to(tmp_path / "x").as_posix() for p in (tmp_path / "x").rglob("*")
    )
    assert extracted == ["out.csv", "sub", "sub/r.bin", "suid"]  # nothing outside, no link


def test_pack_is_bounded_by_count_size_and_total(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    names = []
    for i in range(10_000):
        (src / f"f{i:05d}").write_bytes(b"x")
        names.append(f"f{i:05d}")
    packed = pack(src, names, tmp_path, "many.zip", **BOUNDS)
    assert len(packed.names) == 100 and packed.notes == ["more than 100 files"]
    with open(src / "huge", "wb") as fh:  # 8 GiB, sparse: refused by its size, never read
        fh.truncate(8 << 30)
    for i in range(6):
        (src / f"k{i}").write_bytes(b"k" * 1000)
    packed = pack(src, ["huge", *(f"k{i}" for i in range(6))], tmp_path, "big.zip", **BOUNDS)
    assert packed.names == [f"k{i}" for i in range(5)] and packed.size == 5000
    assert [n.split(" (")[0] for n in packed.notes] == ["huge", "k5"]
    assert (tmp_path / "big.zip").stat().st_size < 6000


def test_pack_keeps_an_equal_archive_and_replaces_a_planted_link(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("A")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "w.zip").symlink_to(victim)
    assert pack(src, ["a.txt"], tmp_path, "w.zip", **BOUNDS).changed
    assert victim.read_text() == "keep me" and not (tmp_path / "w.zip").is_symlink()
    inode = (tmp_path / "w.zip").stat().st_ino
    again = pack(src, ["a.txt"], tmp_path, "w.zip", **BOUNDS)
    assert not again.changed and (tmp_path / "w.zip").stat().st_ino == inode
    (src / "a.txt").write_text("B")
    assert pack(src, ["a.txt"], tmp_path, "w.zip", **BOUNDS).changed
    assert pack(src, [], tmp_path, "none.zip", **BOUNDS).names == []
    assert not (tmp_path / "none.zip").exists()  # nothing to pack: nothing written


def test_members_of_lists_only_safe_regular_members(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as zf:
        zf.writestr("ok.csv", "1")
        zf.writestr("../escape", "x")
        zf.writestr("dir/", "")
    with zipfile.ZipFile(tmp_path / "z.zip") as zf:
        assert [i.filename for i in members_of(zf)] == ["ok.csv"]
