"""Build kernel-agent transcripts by hand from real kernel results (test helper).

:func:`build_transcript` runs each :class:`Step` in one real ``KernelSession`` and
records it through :class:`~kernel_agent.notebook.transcript.Transcript` with the per-cell
metadata the agent writes, so clean/verify/export tests work on genuine outputs.
"""

from __future__ import annotations

import base64
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_agent import KernelSession, Transcript

__all__ = ["Step", "build_transcript", "RUN_METADATA", "PLOT_STEPS", "edit_png"]

RUN_METADATA: dict[str, Any] = {
    "model": "test-model-7b",
    "task": "Plot the squares of 0..4 and report their sum",
    "status": "ok",
    "usage": {"prompt_tokens": 1200, "completion_tokens": 345, "total_tokens": 1545},
    "started": "2025-01-02T03:04:05+00:00",
    "ended": "2025-01-02T03:04:17+00:00",
    "duration_s": 12.0,
    "sandbox": {"mode": "none"},
}


@dataclass
class Step:
    """One cell the 'agent' writes. ``skipped`` cells are recorded without running."""

    code: str
    prose: str | None = None
    replay: bool = False
    skipped: bool = False
    timeout: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


#: A deterministic analysis with a plot in a distinctive colour (magenta bars).
PLOT_STEPS = [
    Step(
        "import numpy as np\nx = np.arange(5)\nsquares = x ** 2\nprint(squares)",
        prose="Make the data.",
    ),
    Step("total = squares.sum(\nprint(total)"),  # a failed attempt (SyntaxError)
    Step("total = int(squares.sum())\nprint(total)", prose="Sum them."),
    Step(
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots(figsize=(6, 4))\n"
        "ax.bar(x, squares, color='#ff00ff')\nax.set_title('squares')\nplt.show()",
        prose="Plot them.",
    ),
    Step("{'total': total, 'n': len(squares)}"),
]


def build_transcript(
    path: Path,
    steps: list[Step],
    *,
    task: str = RUN_METADATA["task"],
    answer: str | None = "The sum of the squares is 30.",
    metadata: dict[str, Any] | None = None,
    cwd: Path | None = None,
) -> Transcript:
    """Run ``steps`` in a fresh kernel and record them like the agent does."""
    meta = dict(RUN_METADATA if metadata is None else metadata)
    with KernelSession(cwd=cwd or path.parent, interrupt_grace=1.0) as kernel:
        transcript = Transcript(
            path, kernelspec=kernel.kernelspec, language_info=kernel.language_info, metadata=meta
        )
        transcript.add_markdown(task, {"role": "task"})
        for number, step in enumerate(steps, start=1):
            if step.prose:
                transcript.add_markdown(step.prose, {"role": "prose"})
            cell_meta: dict[str, Any] = {"step": number, "attempt": 1, "model": meta.get("model")}
            if step.skipped:
                cell_meta.update(status="skipped", restarted=False)
                result = None
            else:
                result = kernel.execute(step.code, timeout=step.timeout)
                cell_meta.update(
                    status=result.status,
                    restarted=result.restarted,
                    exec_s=result.duration,
                    gen_s=0.0,
                    tokens={"prompt_tokens": 10, "completion_tokens": 5},
                )
            if step.replay:
                cell_meta["replay"] = True
            cell_meta.update(step.extra)
            transcript.add_code(step.code, result, cell_meta)
        if answer is not None:
            transcript.add_markdown(answer, {"role": "answer"})
    transcript.validate()
    return transcript


def edit_png(data: str, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> str:
    """``data`` (base64 PNG) with the pixels in ``box`` painted ``colour``."""
    from PIL import Image, ImageDraw

    image = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGBA")
    ImageDraw.Draw(image).rectangle(box, fill=(*colour, 255))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def require_chromium() -> None:
    """Skip without Debian's chromium; under CI, fail instead (make test installs it)."""
    import pytest

    from kernel_agent.notebook.chromium import find_chromium

    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: make test must run system-deps-chromium")
        pytest.skip("chromium is not installed (make system-deps-chromium)")
