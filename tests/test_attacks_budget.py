"""The acceptance fuzz of issue #30: every field of every iopub message type, filled with
megabytes in turn (and floods of many small messages), sent by a real sandboxed kernel
through its own session, through the real executor, KernelState, transcript and clean
notebook writer. For every case: the agent process's peak RSS stays under 600 MB, the
notebook and the clean notebook under 100 MB, what the model reads of the cell stays
small, and the next cell runs. Then the review's M1-M5 payloads over several cells of
one run (one budget), through the real CLI.

Peak RSS is this process's ``VmHWM``, reset before each case (``/proc/self/clear_refs``), counted from
a fresh agent's footprint (this process holds what earlier tests of the session left).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from fake_openai import run_cell, text
from fuzz_messages import CASES, kernel_code
from test_attacks_memory import code_cells, needs_bwrap, run_agent

from kernel_agent.kernel_state.state import CellRecord, KernelState
from kernel_agent.notebook.bounds import RunBudget
from kernel_agent.notebook.transcript import Transcript
from kernel_agent.sandbox import make_launcher
from kernel_agent.settings import Settings

BIG = 12_000_000  # over the per-output bound (1 M), a cell's (8 M) with three copies
RSS_MB, NOTEBOOK_MB = 600, 100


def _peak_mb() -> int:
    with open("/proc/self/status") as f:
        kb = next(line for line in f if line.startswith("VmHWM:")).split()[1]
    return int(kb) // 1024


def _rss_mb() -> int:
    with open("/proc/self/status") as f:
        kb = next(line for line in f if line.startswith("VmRSS:")).split()[1]
    return int(kb) // 1024


#: what a fresh agent process holds before any cell (Python, pandas, jupyter_client,
#: nbformat: ~150 MB measured here). The bound is checked on this test process, which
#: holds whatever earlier tests of the session left, so its peak counts from its own
#: RSS at the reset, plus this.
FRESH_AGENT_MB = 150


def _reset_peak() -> int:
    """Reset VmHWM to the current RSS; returns what a fresh agent would hold more or less
    than this process now (add it to a peak read afterwards)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return FRESH_AGENT_MB - _rss_mb()


async def _fuzz(tmp_path: Path) -> list[str]:
    from kernel_agent.executors.kernel import AsyncKernelSession

    settings = Settings(cwd=tmp_path, cell_timeout=60)
    kernel = AsyncKernelSession(cwd=tmp_path, launcher=make_launcher(settings, tmp_path))
    report = []
    await kernel.start()
    try:
        for index, case in enumerate(CASES):
            # each case gets a run of its own: a fresh budget, a fresh notebook
            kernel.run_budget = RunBudget.for_outputs(kernel.max_output_chars)
            kernel.display_map.clear()
            nb_path = tmp_path / f"case{index}.ipynb"
            transcript = Transcript(
                nb_path, kernelspec=kernel.kernelspec, language_info=kernel.language_info
            )
            state = KernelState(kernel, transcript, settings)
            offset = _reset_peak()
            started = time.monotonic()
            records = []
            for code in (kernel_code(case, BIG), "print(6 * 7)"):
                async for item in state.run(code):
                    if isinstance(item, CellRecord):
                        records.append(item)
            seen = state.view(records[0]).text
            clean = state.write_clean()
            peak = _peak_mb() + offset
            sizes = [p.stat().st_size / 2**20 for p in (nb_path, clean)]
            took = time.monotonic() - started
            report.append(
                f"{case.name}: peak {peak} MB, notebook {sizes[0]:.1f} MB, "
                f"clean {sizes[1]:.1f} MB, seen {len(seen)} chars, {took:.1f} s"
            )
            assert peak < RSS_MB, report[-1]
            assert max(sizes) < NOTEBOOK_MB, report[-1]
            assert len(seen) < 20_000, report[-1]
            first, after = (r.result for r in records)
            assert first.status in ("ok", "error"), report[-1]
            assert first.execution_count is None or first.execution_count < 2**31
            assert after.status == "ok" and after.outputs[0].text == "42\n", report[-1]
            for path in (nb_path, clean):
                path.unlink()
    finally:
        await kernel.shutdown()
    return report


@needs_bwrap
@pytest.mark.timeout(600)
def test_every_message_field_flooded_keeps_the_agent_and_notebooks_bounded(
    tmp_path: Path,
) -> None:
    report = asyncio.run(_fuzz(tmp_path))
    print("\n".join(report))


# ------------------------------------------------------------------ M1-M5, one run
_KERNEL = (
    "from ipykernel.kernelbase import Kernel\n"
    "from IPython.display import display\n"
    "k = Kernel.instance(); sess = k.session; parent = k.get_parent('shell')\n"
)
M3 = _KERNEL + (
    "tb = ['E' * 1_000_000] * 60\n"
    "sess.send(k.iopub_socket, 'error', {'ename': 'Boom', 'evalue': 'v' * 10_000_000,"
    " 'traceback': tb}, parent=parent)\n"
    "sess.send(k.iopub_socket, 'display_data', {'data': {'text/plain': 'small'},"
    " 'metadata': {'m': 'M' * 60_000_000}, 'transient': {}}, parent=parent)\n"
    "sess.send(k.iopub_socket, 'execute_result', {'data': {'text/plain': 'r'},"
    " 'metadata': {'m': 'M' * 30_000_000}, 'execution_count': 10**30}, parent=parent)\n"
    "print('m3 sent')\n"
)
M4 = _KERNEL + (
    "for i in range(32):\n"
    "    display({'text/plain': 'd%d' % i}, raw=True, display_id='same')\n"
    "sess.send(k.iopub_socket, 'update_display_data', {'data': {'text/plain': 'u' * 999_000},"
    " 'metadata': {'m': 'z' * 10_000_000}, 'transient': {'display_id': 'same'}}, parent=parent)\n"
    "print('m4 sent')\n"
)
M5 = _KERNEL + (
    "for i in range(40):\n"
    "    display({'text/plain': 'd'}, raw=True, display_id=f'id{i}')\n"
    "for i in range(300):\n"
    "    sess.send(k.iopub_socket, 'update_display_data', {'data': {'text/plain': 'u' * 900_000},"
    " 'metadata': {'m': 'z' * 900_000}, 'transient': {'display_id': f'id{i % 40}'}},"
    " parent=parent)\n"
    "print('m5 sent')\n"
)


@needs_bwrap
@pytest.mark.timeout(300)
def test_m1_to_m5_over_one_run_keep_the_agent_and_the_notebooks_bounded(
    fake_llm, tmp_path: Path
) -> None:  # noqa: ANN001
    # each cell makes a new variable: the agent sees progress and goes on
    cells = [
        f"v{i} = {i}\nprint('cell', v{i})\n{code}" for i, code in enumerate([M3] * 5 + [M4, M5, M4])
    ]
    fake_llm.enqueue(*(run_cell(c) for c in cells), run_cell("print(6 * 7)"), text("Done: 42."))
    proc, nb, peak_mb = run_agent(fake_llm, tmp_path, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "Done: 42."
    assert peak_mb < RSS_MB, f"agent peak RSS {peak_mb} MB"
    size_mb = nb.stat().st_size / 2**20
    clean_mb = nb.with_name("run.clean.ipynb").stat().st_size / 2**20
    assert size_mb < 40 and clean_mb < 40, f"notebook {size_mb:.1f} MB, clean {clean_mb:.1f} MB"
    code = code_cells(nb)
    assert all(c.execution_count is None or c.execution_count < 2**31 for c in code)
    assert "42" in "".join(o.get("text", "") for o in code[-1].outputs)
    # what the model read stayed small: every request, all its messages
    largest = max(sum(len(str(m.get("content"))) for m in r.messages) for r in fake_llm.requests)
    assert largest < 100_000, largest
    print(f"M1-M5: peak RSS {peak_mb} MB, notebook {size_mb:.1f} MB, largest request {largest}")


# ------------------------------------------------------------------ L2: the model's request
def _forged_namespace(variant: str) -> str:
    """A cell that makes the kernel answer every later namespace probe with a forged
    report (as the review's L2 did), then prints."""
    entries = {
        # the review's: 24 new variables with 700-character names, 20 x 80-character columns
        "long_names": "{('v%d_%d_' % (n, i)) + 'n' * 700: {'type': 'DataFrame', 'id': i,"
        " 'shape': '(1, 20)', 'columns': ['c' * 80] * 20} for i in range(24)}",
        # not in the review: 60 short names, every field long (within the parse limit)
        "many_full": "{'v%d_%d' % (n, i): {'type': 'T' * 200, 'id': i, 'shape': 's' * 200,"
        " 'value': 'x' * 200, 'dtype': 'd' * 200, 'columns': ['c' * 100] * 20}"
        " for i in range(60)}",
    }[variant]
    return (
        "import json\n"
        "_ip = get_ipython(); _real = _ip.user_expressions; _n = [0]\n"
        "def _forged(ex):\n"
        "    out = _real(ex); _n[0] += 1; n = _n[0]\n"
        "    if 'ns' in ex:\n"
        f"        report = {entries}\n"
        "        out['ns'] = {'status': 'ok', 'data': {'text/plain': repr(json.dumps(report))},"
        " 'metadata': {}}\n"
        "    return out\n"
        "_ip.user_expressions = _forged\n"
        "print('forging')\n"
    )


@needs_bwrap
@pytest.mark.timeout(200)
@pytest.mark.parametrize("variant", ["long_names", "many_full"])
def test_l2_forged_namespace_reports_do_not_inflate_the_model_request(
    fake_llm, tmp_path: Path, variant: str
) -> None:  # noqa: ANN001
    cells = [_forged_namespace(variant)] + [f"x{i} = {i}\nprint('cell {i}')" for i in range(4)]
    fake_llm.enqueue(*(run_cell(c) for c in cells), text("Done."))
    proc, _, _ = run_agent(fake_llm, tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sizes = [len(json.dumps(r.messages)) for r in fake_llm.requests]
    growth = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    # each cell adds its code, its output and at most a 1,500-character variables note
    assert max(growth) < 4_000, sizes
    assert max(sizes) < sizes[0] + 5 * 4_000, sizes
    print(f"L2 {variant}: request sizes {sizes}")


# ------------------------------------------------------------------ verify's re-run
@needs_bwrap
@pytest.mark.timeout(200)
def test_verify_keeps_a_rerun_within_the_same_bounds(tmp_path: Path) -> None:
    """verify re-runs someone's code in a fresh kernel (nbclient): its outputs go through
    the same collector, so M3/M4 in a notebook do not blow up verify or its written copy."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from kernel_agent.notebook.verify import verify_notebook

    nb = new_notebook(cells=[new_code_cell(M3), new_code_cell(M4), new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    path, written = tmp_path / "stranger.ipynb", tmp_path / "rerun.ipynb"
    nbformat.write(nb, path)
    offset = _reset_peak()
    report = verify_notebook(path, write=written)
    peak = _peak_mb() + offset
    assert peak < RSS_MB, f"verify peak RSS {peak} MB"
    assert written.stat().st_size < 20 * 2**20
    rerun = nbformat.read(written, as_version=4)
    assert all(c.execution_count is None or c.execution_count < 2**31 for c in rerun.cells)
    assert rerun.cells[2].outputs[0].text == "42\n"
    assert report.cells[2].status in ("same", "differs")
    print(f"verify: peak RSS {peak} MB, written {written.stat().st_size / 2**20:.1f} MB")
