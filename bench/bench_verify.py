"""What does ``kernel-agent verify`` cost, against the original run of the same cells?

Builds three small transcripts with a real kernel (original time = the sum of the
kept cells' ``CellResult.duration``), cleans them, verifies each clean notebook
REPEAT times and prints medians. A few seconds of work per case.

    PYTHONPATH=src python bench/bench_verify.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from nbfactory import PLOT_STEPS, Step, build_transcript  # noqa: E402

from kernel_agent.notebook.clean import write_pair  # noqa: E402
from kernel_agent.notebook.compare import compare_outputs  # noqa: E402
from kernel_agent.notebook.verify import verify_notebook  # noqa: E402

REPEAT = 3
CASES = {
    "plot task (4 cells, matplotlib)": PLOT_STEPS,
    "20 trivial cells": [Step(f"x{i} = {i}") for i in range(20)],
    "2 cells sleeping 0.5 s": [Step("import time\ntime.sleep(0.5)")] * 2,
}


def main() -> None:
    plot_cell = None
    with tempfile.TemporaryDirectory() as tmp:
        for name, steps in CASES.items():
            root = Path(tmp) / name.split()[0]
            root.mkdir()
            transcript = build_transcript(root / "t.ipynb", steps)
            _, clean = write_pair(transcript, root / "t.ipynb", root / "t.clean.ipynb")
            reports = [verify_notebook(clean) for _ in range(REPEAT)]
            assert all(r.reproduced for r in reports), reports[0].summary()
            original = reports[0].original_s or 0.0
            total = statistics.median(r.total_s for r in reports)
            start = statistics.median(r.startup_s for r in reports)
            cells = statistics.median(r.execute_s for r in reports)
            n = len(reports[0].cells)
            print(
                f"{name:34s} original {original:6.3f} s | verify total {total:6.3f} s "
                f"= start {start:5.3f} + cells {cells:6.3f} "
                f"+ compare/shutdown {total - start - cells:5.3f}"
                f" | cells/original {cells / original:5.2f}x | per cell {cells / n * 1000:6.1f} ms"
            )
            if plot_cell is None:
                plot_cell = next(
                    (
                        c
                        for c in reports[0].executed.cells
                        if c.cell_type == "code"
                        and any("image/png" in o.get("data", {}) for o in c.outputs)
                    ),
                    None,
                )
            executed = [
                c.get("execution_count") for c in reports[0].executed.cells if c.cell_type == "code"
            ]
            assert executed == list(range(1, n + 1)), executed
    # the comparison alone, for the plot cell (PNG decode + pixel diff)
    cell = plot_cell
    t0 = time.perf_counter()
    for _ in range(20):
        compare_outputs(cell.outputs, cell.outputs)
    each = (time.perf_counter() - t0) / 20
    print(f"compare_outputs on the plot cell (600x400 PNG): {each * 1000:.1f} ms")


if __name__ == "__main__":
    main()
