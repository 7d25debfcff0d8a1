"""What privilege separation costs: a task in the unprivileged worker against in-process.

As root, ``export``, ``observe``'s pages, verify's comparison and the images a session
shows a model run in ``python -m kernel_agent.notebook.worker`` as a leased uid (in a
bwrap of its own where bwrap works). This times each task both ways on the same request,
in the same run: in-process (``worker.TASKS[task]``, what a non-root user gets) and in
the worker (``worker.call``), and prints medians, the difference and the ratio.

    PYTHONPATH=src python bench/bench_unprivileged.py      # as root
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from jupyter_core.paths import jupyter_path  # noqa: E402
from nbfactory import PLOT_STEPS, build_transcript  # noqa: E402

from kernel_agent.notebook import worker  # noqa: E402
from kernel_agent.notebook.nbio import read_notebook  # noqa: E402

REPEAT = 5


def timed(fn: Any) -> float:
    runs = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def plain_process(task: str, request: Any) -> Any:
    """The same worker as a plain child of ours: no uid switch, no bwrap, no rlimits."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {src!r}); "
         "from kernel_agent.notebook.worker import main; sys.exit(main())", task],
        input=json.dumps(request).encode(), capture_output=True, check=True,
        env={"PATH": "/usr/bin:/bin", "JUPYTER_PATH": os.pathsep.join(jupyter_path())},
    )  # fmt: skip
    return json.loads(done.stdout)["ok"]


def main() -> None:
    if os.geteuid() != 0:
        print("bench_unprivileged: skipped, not root (only root's tasks go to the worker)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = build_transcript(Path(tmp) / "plot.ipynb", PLOT_STEPS).path
        nb = read_notebook(path)
        outputs = [c.outputs for c in nb.cells if c.cell_type == "code"]
        images = [
            ("image/png", str(o["data"]["image/png"]))
            for outs in outputs
            for o in outs
            if "image/png" in o.get("data", {})
        ]
        requests = {
            "html": {"nb": nb, "dir": tmp, "name": "plot"},
            "markdown": {"nb": nb, "dir": tmp, "name": "plot", "files_dir": "f", "key": "plot"},
            "compare": {"pairs": [[o, o] for o in outputs], "tolerance": [0.01, 2.0, 16]},
            "images": {"images": [list(i) for i in images]},
        }
        worker.call("html", requests["html"])  # warm: the bwrap probe, the page cache
        print(f"{len(nb.cells)} cells, {len(images)} image(s), {path.stat().st_size:,} bytes")
        for task, request in requests.items():
            inproc = timed(lambda t=task, r=request: worker.TASKS[t](r))
            plain = timed(lambda t=task, r=request: plain_process(t, r))
            isolated = timed(lambda t=task, r=request: worker.call(t, r))
            print(
                f"{task:9s} in-process {inproc * 1000:7.1f} ms | a plain child process "
                f"{plain * 1000:7.1f} ms | the unprivileged worker {isolated * 1000:7.1f} ms "
                f"| ratio {isolated / inproc:6.1f}x in-process, {isolated / plain:4.2f}x plain"
            )


if __name__ == "__main__":
    main()
