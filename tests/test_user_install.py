"""Install kernel-agent as a user would and do an analysis that needs the data stack.

A fresh venv, ``pip install <repo>`` without extras and not editable: the kernel of
that install must import pandas, scipy, sklearn, statsmodels, seaborn, ... (issue 11:
pandas used to be a test extra, so a user's kernel had none of it), and
``kernel-agent run --file data.csv`` from that venv, in the default sandbox, must
compute a t-test on the file. Slow the first time (pip downloads, wheels are cached).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from fake_openai import run_cell, text

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[1]
STACK = ("pandas", "numpy", "scipy", "sklearn", "statsmodels", "matplotlib", "seaborn",
         "pyarrow", "openpyxl")  # fmt: skip
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".kernel_agent_cache",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    "notebooks",
)


def user_env(venv: Path) -> dict[str, str]:
    """Our environment minus anything that would let the venv see our packages or settings."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "OPENAI_", "KERNEL_AGENT_", "JUPYTER_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ``pip install <copy of the repo>``: no extras, not editable."""
    base = tmp_path_factory.mktemp("user-install")
    source, venv = base / "kernel-agent", base / "venv"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)  # a build leaves nothing in the checkout
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        env=user_env(venv),
        timeout=840,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    print(f"\nuser install: {time.monotonic() - started:.0f} s")
    return venv


def test_the_installed_kernel_imports_the_data_stack(user_venv: Path, tmp_path: Path) -> None:
    script = f"""
import json, sys
from kernel_agent import KernelSession
from kernel_agent.kernel_state.kernel_probe import LIBRARY_PROBE_CODE, parse_library_probe

code = "import importlib, json, sys\\n" + (
    "print(json.dumps({{'prefix': sys.prefix, 'versions': "
    "{{m: importlib.import_module(m).__version__ for m in {STACK!r}}}}}))"
)
with KernelSession("python3", cwd={str(tmp_path)!r}) as k:
    result = k.execute(code, timeout=180, user_expressions={{"libs": LIBRARY_PROBE_CODE}})
    said = "".join(o.get("text", "") for o in result.outputs)
    print(json.dumps({{"ok": result.ok, "error": str(result.error), "said": said,
                      "probe": parse_library_probe(result.user_expressions.get("libs")),
                      "package": __import__("kernel_agent").__file__}}))
"""
    proc = subprocess.run(
        [str(user_venv / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        env=user_env(user_venv),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["package"].startswith(str(user_venv)), report["package"]  # not our checkout
    assert report["ok"], report["error"] + report["said"]
    kernel = json.loads(report["said"])
    assert Path(kernel["prefix"]) == user_venv  # the venv's own kernel, not ours
    assert set(kernel["versions"]) == set(STACK) and all(kernel["versions"].values())
    assert {m: report["probe"].get(m) for m in STACK} == kernel["versions"]


def test_kernel_agent_run_from_the_install_does_a_t_test_on_a_file(
    user_venv: Path, fake_llm, tmp_path: Path
) -> None:
    from scipy import stats

    inputs, here = tmp_path / "inputs", tmp_path / "project"
    inputs.mkdir()
    here.mkdir()  # the kernel sees data.csv only through --file
    a = [12.1, 11.4, 13.0, 12.7, 11.9, 12.4, 13.3, 12.0]
    b = [10.9, 11.2, 10.4, 11.8, 10.7, 11.1, 10.2, 11.5]
    rows = [f"{g},{v}" for g, vs in (("a", a), ("b", b)) for v in vs]
    (inputs / "data.csv").write_text("group,score\n" + "\n".join(rows) + "\n")
    expected = stats.ttest_ind(a, b)
    printed = f"t={expected.statistic:.4f} p={expected.pvalue:.3g}"
    fake_llm.enqueue(
        run_cell(
            "import sys\nimport pandas as pd\nfrom scipy import stats\n"
            "df = pd.read_csv('data.csv')\n"
            "r = stats.ttest_ind(df[df.group == 'a'].score, df[df.group == 'b'].score)\n"
            "print(f't={r.statistic:.4f} p={r.pvalue:.3g}')\nprint(sys.prefix)"
        ),
        text(f"The two-sample t-test gives {printed}."),
    )
    notebook = tmp_path / "run.ipynb"
    env = {**user_env(user_venv), "OPENAI_API_KEY": "sk-test"}
    started = time.monotonic()
    proc = subprocess.run(
        [str(user_venv / "bin" / "kernel-agent"), "run", "--base-url", fake_llm.base_url,
         "--model", "test", "--cwd", str(here), "--file", str(inputs / "data.csv"),
         "--notebook", str(notebook), "--format", "json",
         "Is the mean score of group a different from group b? Use a t-test on data.csv."],
        capture_output=True, text=True, env=env, cwd=here, timeout=300,
    )  # fmt: skip
    print(f"\nkernel-agent run: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["status"] == "ok" and printed in data["answer"]
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    said = "".join(o.get("text", "") for o in cell.outputs)
    assert said == f"{printed}\n{user_venv}\n", cell.outputs
    sandbox = nb.metadata["kernel_agent"]["sandbox"]
    if shutil.which("bwrap"):  # --sandbox auto picks the sandbox where it works
        assert sandbox["mode"] == "bwrap", sandbox
    assert len(fake_llm.requests) == 2
    assert not list(here.iterdir())  # the kernel wrote nothing into the user's directory
