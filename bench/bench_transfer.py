"""File transfer to and from a gateway kernel, against a local floor measured in the same run.

A 50 MB file of random bytes goes to a Kernel Gateway kernel on 127.0.0.1 (in a root
dir of its own) and comes back, through :class:`kernel_agent.remote.transfer.KernelFiles`
(user_expressions; uploads as base64, downloads as raw comm buffers or base64;
sha256 on both sides). The floors are what a
local kernel costs for the same file: ``--file`` links it (a symlink), and delivery
copies it back (``safefs.copy_out``); a plain copy plus a sha256 is printed as the fair
floor for a transfer that checks integrity. Best of N rounds.

``python bench/bench_transfer.py [MB] [ROUNDS]``
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from gateway_server import KernelGateway  # noqa: E402

from kernel_agent.edges.safefs import copy_out  # noqa: E402
from kernel_agent.executors.gateway import AsyncGatewaySession  # noqa: E402
from kernel_agent.remote.transfer import KernelFiles, TransferLimits  # noqa: E402


def best(laps: list[float]) -> float:
    return min(laps)


def mb_s(size: int, seconds: float) -> float:
    return size / 1e6 / seconds if seconds > 0 else float("inf")


def local_floors(src: Path, scratch: Path, rounds: int) -> dict[str, float]:
    size = src.stat().st_size
    link, copy, hashed, out = [], [], [], []
    for i in range(rounds):
        t = time.perf_counter()
        os.symlink(src, scratch / f"link{i}")
        link.append(time.perf_counter() - t)
        t = time.perf_counter()
        shutil.copyfile(src, scratch / f"copy{i}")
        copy.append(time.perf_counter() - t)
        t = time.perf_counter()
        shutil.copyfile(src, scratch / f"hashed{i}")
        hashlib.sha256(src.read_bytes()).hexdigest()
        hashlib.sha256((scratch / f"hashed{i}").read_bytes()).hexdigest()
        hashed.append(time.perf_counter() - t)
        t = time.perf_counter()
        copy_out(src.parent, src.name, scratch, f"out{i}", limit=size)
        out.append(time.perf_counter() - t)
        for name in (f"copy{i}", f"hashed{i}", f"out{i}"):
            (scratch / name).unlink()
    return {
        "link (local --file)": best(link),
        "copy": best(copy),
        "copy + sha256 both sides": best(hashed),
        "copy_out (local delivery)": best(out),
    }


async def remote(
    url: str, token: str, src: Path, scratch: Path, rounds: int, limits: TransferLimits
) -> tuple[float, float]:
    session = AsyncGatewaySession(url, token, "python3")
    await session.start()
    try:
        kernel = KernelFiles(session, limits)
        await kernel.setup(None)
        size = src.stat().st_size
        up, down = [], []
        for i in range(rounds):
            t = time.perf_counter()
            await kernel.upload(src, "blob.bin")
            up.append(time.perf_counter() - t)
            t = time.perf_counter()
            await kernel.download("blob.bin", scratch, f"back{i}", size=size)
            down.append(time.perf_counter() - t)
            if (scratch / f"back{i}").stat().st_size != size:
                raise SystemExit("the file came back damaged")
            (scratch / f"back{i}").unlink()
        return best(up), best(down)
    finally:
        await session.shutdown()


def main() -> None:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    token = secrets.token_hex(8)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "kg").mkdir()
        (root / "client").mkdir()
        (root / "scratch").mkdir()
        src = root / "client" / "blob.bin"
        src.write_bytes(os.urandom(mb * 1_000_000))
        size = src.stat().st_size
        floors = local_floors(src, root / "scratch", rounds)
        kg = KernelGateway(root / "kg", token).start()
        try:
            results = {}
            configs = {
                "1 MiB chunks, base64": TransferLimits(1 << 20, 1 << 20, raw_chunks=False),
                "4 MiB chunks, base64": TransferLimits(raw_chunks=False),
                "4 MiB chunks (default)": TransferLimits(),
            }
            for name, limits in configs.items():
                results[name] = asyncio.run(
                    remote(kg.url, token, src, root / "scratch", rounds, limits)
                )
        finally:
            kg.stop()
    print(f"{mb} MB file, best of {rounds} (2 cores, loopback)")
    print(f"{'path':58} {'seconds':>8} {'MB/s':>9}")
    for name, seconds in floors.items():
        print(f"{'local: ' + name:58} {seconds:8.4f} {mb_s(size, seconds):9.1f}")
    fair = floors["copy + sha256 both sides"]
    for config, (up, down) in results.items():
        for what, seconds in (("to the kernel", up), ("from the kernel", down)):
            label = f"gateway, {config}, {what}"
            print(
                f"{label:58} {seconds:8.4f} {mb_s(size, seconds):9.1f}"
                f"   {seconds / fair:5.1f}x copy+sha256"
            )


if __name__ == "__main__":
    main()
