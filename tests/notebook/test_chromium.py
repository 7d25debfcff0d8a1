"""chromium.py + scripts/render_html.py: an exported notebook, rendered, shows its plot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbfactory import PLOT_STEPS, build_transcript, require_chromium

from kernel_agent.errors import ExportError
from kernel_agent.notebook.chromium import screenshot
from kernel_agent.notebook.clean import write_pair
from kernel_agent.notebook.export import export_notebook

pytestmark = pytest.mark.timeout(180)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "render_html.py"


@pytest.fixture(scope="module", autouse=True)
def chromium():
    require_chromium()


@pytest.fixture(scope="module")
def clean_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("render")
    transcript = build_transcript(root / "run.ipynb", PLOT_STEPS)
    return write_pair(transcript, root / "run.ipynb", root / "run.clean.ipynb")[1]


def magenta_pixels(png: Path) -> int:
    """How many pixels are close to the bars' #ff00ff."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    close = (rgb[..., 0] > 200) & (rgb[..., 1] < 60) & (rgb[..., 2] > 200)
    return int(close.sum())


def test_rendered_export_shows_the_plot(clean_path, tmp_path):
    page = export_notebook(clean_path, to="html", output=tmp_path / "page.html")
    shot = screenshot(page, tmp_path / "page.png")
    from PIL import Image

    assert Image.open(shot).size == (1200, 1600)
    # five bars 0,1,4,9,16 high in a 6x4 inch figure: thousands of magenta pixels
    assert magenta_pixels(shot) > 5_000


def test_without_the_image_nothing_is_magenta(clean_path, tmp_path):
    nb = nbformat.read(clean_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if "image/png" not in o.get("data", {})]
    stripped = tmp_path / "stripped.ipynb"
    nbformat.write(nb, stripped)
    page = export_notebook(stripped, to="html")
    assert magenta_pixels(screenshot(page, tmp_path / "stripped.png")) == 0


def test_render_script_takes_a_notebook(clean_path, tmp_path):
    shot = tmp_path / "script.png"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(clean_path), str(shot), "--window-size", "1000,1400"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(shot)
    assert magenta_pixels(shot) > 3_000


def test_missing_page_is_a_clear_error(tmp_path):
    with pytest.raises(ExportError, match="no such HTML file"):
        screenshot(tmp_path / "nope.html", tmp_path / "x.png")
