"""What one save costs as the notebook grows: Transcript.save against nbformat.write.

    python bench/bench_transcript.py

For 10, 100 and 1000 cells, each with a stdout stream and an execute_result, and
optionally a ~30 KB PNG: the time of one save right after a new cell is added, as
the agent does after every cell. Compared: ``nbformat.write`` (which validates),
``Transcript.save`` with nothing frozen, and with the finished cells frozen (each
is serialised once and its text reused).
"""

from __future__ import annotations

import base64
import os
import statistics
import tempfile
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import nbformat

from kernel_agent.notebook.transcript import Transcript
from kernel_agent.results import CellResult

SIZES = (10, 100, 1000)
PNG_BYTES = 22_500  # ~30 KB once base64-encoded, as nbformat stores it


def cell_result(i: int, png: str | None) -> CellResult:
    now = datetime.now(timezone.utc)
    outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"step {i}\n" * 5),
        nbformat.v4.new_output(
            "execute_result", data={"text/plain": repr(list(range(20)))}, execution_count=i
        ),
    ]
    if png is not None:
        outputs.append(
            nbformat.v4.new_output(
                "display_data", data={"image/png": png, "text/plain": "<Figure>"}
            )
        )
    return CellResult(f"x = {i}\nprint(x)", "ok", i, outputs, None, now, now)


def build(path: Path, n: int, png: str | None) -> Transcript:
    t = Transcript(
        path,
        kernelspec={"name": "python3", "display_name": "Python 3", "language": "python"},
        language_info={"name": "python"},
        autosave=False,
    )
    for i in range(1, n + 1):
        if i % 5 == 0:
            t.add_markdown(f"Step {i}")
        t.add_code(f"x = {i}", cell_result(i, png))
    return t


def time_saves(t: Transcript, png: str | None, repeats: int, save, freeze: bool) -> float:
    """Median ms of ``save()`` right after one more cell is added."""
    times = []
    for _ in range(repeats):
        cell = t.add_code("y = 1", cell_result(len(t.cells) + 1, png))
        start = time.perf_counter()
        save()
        times.append((time.perf_counter() - start) * 1000)
        if freeze:
            t.freeze(cell)
    return statistics.median(times)


def main() -> None:
    png = base64.b64encode(os.urandom(PNG_BYTES)).decode()
    tmp = Path(tempfile.mkdtemp(prefix="bench-transcript-"))
    header = ("cells", "png", "file MB", "nbformat.write", "save", "save frozen")
    print("{:>6} {:>4} {:>8} {:>15} {:>8} {:>12}".format(*header))
    for with_png in (False, True):
        for n in SIZES:
            repeats = 5 if n < 1000 else 3
            image = png if with_png else None
            path = tmp / f"nb-{n}-{with_png}.ipynb"
            t = build(path, n, image)
            write_ms = time_saves(
                t, image, repeats, partial(nbformat.write, t.nb, str(path)), False
            )
            plain_ms = time_saves(t, image, repeats, t.save, False)
            t.freeze_all()
            t.save()  # fill the cache once
            frozen_ms = time_saves(t, image, repeats, t.save, True)
            assert path.read_text(encoding="utf-8") == nbformat.writes(t.nb)
            size = path.stat().st_size / 2**20
            print(
                f"{n:>6} {'yes' if with_png else 'no':>4} {size:>8.2f} {write_ms:>12.1f} ms"
                f" {plain_ms:>5.1f} ms {frozen_ms:>9.1f} ms"
            )
            path.unlink()


if __name__ == "__main__":
    main()
