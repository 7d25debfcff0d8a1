"""What delivering a kernel's files as content costs, against a raw copy measured in the same run.

Delivery (:func:`kernel_agent.edges.delivery.deliver`) packs everything the kernel wrote into
one zip beside the notebook (no-follow reads, members stored with a CRC-32) and copies
``set_result``'s data files loose. The floor is a raw copy of the same tree
(``shutil.copyfile`` per file, directories made as needed), the fair
floor for "the files come back". Three work dirs, each within the delivery bounds:

- ``mixed``: two 40 MB CSV-like text files and two 40 MB random (incompressible) files;
- ``random``: four 40 MB random files;
- ``many``: 100 files of 20 KB of text;
- ``small``: a 30 KB table and a 60 KB figure (what a typical run leaves).

As root, each tree is also delivered as a kernel's work dir is: owned by a leased uid, read
by that uid in the unprivileged delivery worker (:mod:`kernel_agent.edges.packer`), its zip
checked and rewritten by the root side. The ``w/deliv`` column is that against the same
tree read in-process in the same run.

Best of N rounds, the page cache warm (each round writes a fresh destination).

``python bench/bench_delivery.py [ROUNDS]``
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kernel_agent.edges.delivery import deliver
from kernel_agent.edges.packer import owner_to_read_as
from kernel_agent.sandbox.uids import leased_user

MB = 1024 * 1024


def text_blob(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    rows = []
    total = 0
    while total < size:
        row = f"{rng.randint(0, 10**6)},{rng.random():.6f},{rng.choice('abcdef') * 3}\n"
        rows.append(row)
        total += len(row)
    return "".join(rows).encode()[:size]


def make(root: Path, kind: str) -> int:
    root.mkdir(parents=True)
    files: dict[str, bytes] = {}
    if kind == "mixed":
        files = {
            "out/a.csv": text_blob(40 * MB, 1),
            "out/b.csv": text_blob(40 * MB, 2),
            "img/c.bin": os.urandom(40 * MB),
            "img/d.bin": os.urandom(40 * MB),
        }
    elif kind == "random":
        files = {f"r{i}.bin": os.urandom(40 * MB) for i in range(4)}
    elif kind == "small":  # what a typical run leaves: a table and a figure
        files = {"out/table.csv": text_blob(30 * 1024, 4), "fig.png": os.urandom(60 * 1024)}
    else:
        blob = text_blob(20 * 1024, 3)
        files = {f"many/f{i:03d}.csv": blob for i in range(100)}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return sum(len(d) for d in files.values())


def raw_copy(src: Path, dest: Path) -> None:
    for path in src.rglob("*"):
        if path.is_file():
            target = dest / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def best(fn, rounds: int, scratch: Path) -> float:  # noqa: ANN001
    laps = []
    for i in range(rounds):
        dest = scratch / f"dest{i}"
        dest.mkdir()
        started = time.perf_counter()
        fn(dest)
        laps.append(time.perf_counter() - started)
        shutil.rmtree(dest)
    return min(laps)


def chown_tree(root: Path, uid: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"delivery as one archive vs a raw copy, best of {rounds} (2026-11-27)")
    as_root = os.geteuid() == 0
    if as_root:
        print("as root: 'worker s' reads the work dir as its owner (a leased uid) in the")
        print("unprivileged delivery worker; 'deliver s' is the same tree read in-process")
    else:
        print("not root: delivery runs in-process only (the worker column is skipped)")
    head = ("work dir", "MB", "raw copy s", "deliver s", "ratio", "worker s", "w/deliv", "zip MB")
    print("{:8} {:>6} {:>10} {:>10} {:>6} {:>9} {:>8} {:>7}".format(*head))
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-delivery-"))
        uid = stack.enter_context(leased_user("bench")) if as_root else -1
        for kind in ("mixed", "random", "many", "small"):
            work = Path(tmp) / kind
            size = make(work, kind)
            raw = best(lambda d: raw_copy(work, d), rounds, Path(tmp))  # noqa: B023
            new = best(lambda d: deliver(work, d / "run.ipynb"), rounds, Path(tmp))  # noqa: B023
            worker = float("nan")
            if as_root:
                chown_tree(work, uid)
                assert owner_to_read_as(work) == uid
                worker = best(lambda d: deliver(work, d / "run.ipynb"), rounds, Path(tmp))  # noqa: B023
            dest = Path(tmp) / "last"
            dest.mkdir()
            found = deliver(work, dest / "run.ipynb")
            zipped = found.archive.stat().st_size / MB if found.archive else 0.0
            shutil.rmtree(dest)
            row = (kind, size / MB, raw, new, new / raw, worker, worker / new, zipped)
            print("{:8} {:6.1f} {:10.3f} {:10.3f} {:6.2f} {:9.3f} {:8.2f} {:7.1f}".format(*row))
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
