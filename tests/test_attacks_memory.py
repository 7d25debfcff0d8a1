"""The review's host-memory and malformed-message attacks (I1, I2, E2, E3), replayed.

Each goes through the real ``kernel-agent run`` CLI, the scripted model server and a
real sandboxed kernel: the kernel's code is the model's cell. The agent's peak RSS is
its own ``VmHWM``, written by a small wrapper as the CLI exits. See the README's
"Isolation and faults" bounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from fake_openai import RecordedRequest, Reply, run_cell, text

from kernel_agent.sandbox import bwrap_problem

pytestmark = pytest.mark.timeout(120)

PROBLEM, _, _ = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no bwrap sandbox here: {PROBLEM}")

# runs the CLI in this process and writes its peak RSS (kB) to argv[1] as it exits
_PEAK_WRAPPER = """
import runpy, sys
out = sys.argv.pop(1)
try:
    runpy.run_module("kernel_agent", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f:
        peak = next(line for line in f if line.startswith("VmHWM:")).split()[1]
    with open(out, "w") as f:
        f.write(peak)
"""

_KERNEL = (
    "from ipykernel.kernelbase import Kernel\n"
    "k = Kernel.instance(); sess = k.session; parent = k.get_parent('shell')\n"
)


def run_agent(
    fake, tmp_path: Path, *, timeout: float = 100
) -> tuple[subprocess.CompletedProcess, Path, int]:  # noqa: ANN001
    """Run the CLI to its end: (the process, its notebook, its peak RSS in MB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    nb, peak = tmp_path / "run.ipynb", tmp_path / "peak_kb"
    args = ["run", "--base-url", fake.base_url, "--model", "test", "--format", "plain"]
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_WRAPPER, str(peak), *args, "--notebook", str(nb), "go"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout,
    )  # fmt: skip
    return proc, nb, int(peak.read_text()) // 1024


def code_cells(nb_path: Path) -> list[nbformat.NotebookNode]:
    nb = nbformat.read(nb_path, as_version=4)
    nbformat.validate(nb)
    return [c for c in nb.cells if c.cell_type == "code"]


# --------------------------------------------------------------------- E3
E3 = {
    "a_deep_json": _KERNEL + "N = 200000\n"
    'sess.send(k.iopub_socket, \'comm_msg\', content=b\'{"comm_id": "x", "data": {"op": "call", '
    "\"id\": \"1\", \"calls\": ' + b'[' * N + b']' * N + b'}}', parent=parent)\n",
    "b_status_without_state": _KERNEL
    + "sess.send(k.iopub_socket, 'status', content={}, parent=parent)\n",
    "c_comm_content_a_list": _KERNEL
    + "sess.send(k.iopub_socket, 'comm_msg', content=b'[1, 2]', parent=parent)\n",
    "d_user_expression_data_a_string": "get_ipython().user_expressions = lambda ex: "
    "{n: {'status': 'ok', 'data': 'not-a-dict'} for n in ex}\n",
    "e_user_expression_huge_literal": "get_ipython().user_expressions = lambda ex: "
    "{n: {'status': 'ok', 'data': {'text/plain': '-' * 300000 + '1'}} for n in ex}\n",
}


@needs_bwrap
@pytest.mark.parametrize("variant", sorted(E3))
def test_e3_one_malformed_message_does_not_end_the_run(
    fake_llm, tmp_path: Path, variant: str
) -> None:  # noqa: ANN001
    attack = E3[variant] + "print('attack sent')\n"
    fake_llm.enqueue(run_cell(attack), run_cell("print(6 * 7)"), text("The answer is 42."))
    proc, nb, _ = run_agent(fake_llm, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "The answer is 42."
    cells = code_cells(nb)
    assert cells[0].source == attack  # the attack cell is in the transcript
    shown = "".join(o.get("text", "") for o in cells[0].outputs)
    assert "attack sent" in shown
    if variant[0] in "abc":
        assert "1 malformed kernel messages were dropped" in shown
    assert "42" in "".join(o.get("text", "") for o in cells[1].outputs)  # the next cell ran


@needs_bwrap
def test_the_cell_is_recorded_before_it_runs(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    # the agent is killed mid-cell: the cell's code is already on disk, marked running
    fake_llm.enqueue(run_cell("import time\nprint('started', flush=True)\ntime.sleep(60)"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    nb = tmp_path / "run.ipynb"
    args = ["run", "--base-url", fake_llm.base_url, "--model", "test", "--format", "plain"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", *args, "--notebook", str(nb), "go"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if nb.exists() and "time.sleep(60)" in nb.read_text():
                break
            time.sleep(0.2)
        else:
            pytest.fail("the cell's code never reached the notebook")
        (cell,) = code_cells(nb)
        assert cell.metadata["kernel_agent"]["status"] == "running"
    finally:
        proc.kill()
        proc.communicate(timeout=30)


# ------------------------------------------------------------------ I1 / I2 / E2
FLOOD = """
import base64, os, sys
from IPython.display import display
blob = "y" * (1000 * 1000 - 10)
for i in range(200):
    display({"text/plain": f"display {i} " + blob}, raw=True)
png = base64.b64encode(b"\\x89PNG\\r\\n\\x1a\\n" + os.urandom(700 * 1000)).decode()
for i in range(50):
    display({"image/png": png}, raw=True)
for i in range(100):   # every stream switch opens a new output
    sys.stdout.write("o" * 500_000); sys.stdout.flush(); sys.stderr.write("e" * 500_000); sys.stderr.flush()
print("last line")
"""


@needs_bwrap
def test_i2_an_output_flood_keeps_the_agent_and_the_notebook_small(
    fake_llm, tmp_path: Path
) -> None:  # noqa: ANN001
    # ~200 MB of text displays, ~47 MB of images and 100 MB of stream switches
    fake_llm.enqueue(run_cell(FLOOD), text("Flooded."))
    started = time.monotonic()
    proc, nb, peak_mb = run_agent(fake_llm, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "Flooded."
    assert peak_mb < 600, f"agent peak RSS {peak_mb} MB"
    size_mb = nb.stat().st_size / 2**20
    assert size_mb < 100, f"notebook {size_mb:.0f} MB"
    assert nb.with_name("run.clean.ipynb").stat().st_size < 100 * 2**20
    (cell,) = code_cells(nb)
    texts = [o.get("text", "") for o in cell.outputs]
    assert cell.outputs[0].data["text/plain"].startswith("display 0 ")  # the head
    assert texts[-1].endswith("last line\n")  # the tail
    assert sum("outputs (" in t and "omitted here" in t for t in texts) == 1
    images = (
        list(nb.with_name("run_files").glob("*.png")) if nb.with_name("run_files").exists() else []
    )
    assert sum(p.stat().st_size for p in images) < 20 * 2**20
    print(
        f"I2: peak RSS {peak_mb} MB, notebook {size_mb:.1f} MB, {time.monotonic() - started:.0f} s"
    )


I1 = (
    _KERNEL
    + """
import threading, time
def flood():
    time.sleep(1.0)
    big = "x" * (50 * 2**20)
    for i in range(40):
        sess.send(k.iopub_socket, "stream", {"name": "stdout", "text": big}, parent=parent)
        time.sleep(0.05)
    sess.send(k.iopub_socket, "stream", {"name": "stdout", "text": "flood done"}, parent=parent)
threading.Thread(target=flood, daemon=True).start()
print("flooding from a thread")
"""
)


@needs_bwrap
def test_i1_a_flood_while_the_agent_waits_for_the_model_is_dropped(
    fake_llm, tmp_path: Path
) -> None:  # noqa: ANN001
    def slow_model(request: RecordedRequest) -> Reply:
        time.sleep(9)  # the kernel's thread sends 2 GB meanwhile
        return text("Waited.")

    fake_llm.enqueue(run_cell(I1), slow_model)
    proc, nb, peak_mb = run_agent(fake_llm, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "Waited."
    assert peak_mb < 600, f"agent peak RSS {peak_mb} MB"
    print(f"I1: peak RSS {peak_mb} MB")


E2 = """
import comm, time, uuid
c = comm.create_comm(target_name="kernel_agent", data={})
calls = [{"tool": "nope" + "x" * 150, "kwargs": {"a": "b" * 150}} for _ in range(64)]
for i in range(600):
    c.send({"op": "call", "id": uuid.uuid4().hex, "calls": calls})
time.sleep(3)
print("sent")
"""


@needs_bwrap
def test_e2_a_tool_call_flood_keeps_a_bounded_record(fake_llm, tmp_path: Path) -> None:  # noqa: ANN001
    fake_llm.enqueue(run_cell(E2), text("Called."))
    proc, nb, peak_mb = run_agent(fake_llm, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (cell,) = code_cells(nb)
    meta = cell.metadata["kernel_agent"]
    assert len(meta["tool_calls"]) == 200
    left_out = meta["tool_calls_left_out"]
    assert left_out.get("unrecorded", 0) + left_out.get("refused", 0) > 0
    assert nb.stat().st_size < 2 * 2**20
    print(f"E2: {json.dumps(left_out)}, peak RSS {peak_mb} MB")


DROP_OWN_IDLE = """
from ipykernel.kernelbase import Kernel
k = Kernel.instance()
mine = k.get_parent('shell')['header']['msg_id']
original = k._publish_status
def publish(status, channel, parent=None):
    sent_for = (parent or k.get_parent(channel)).get('header', {}).get('msg_id')
    if status == 'idle' and sent_for == mine:
        k._publish_status = original  # drop this one idle, as a flooded queue would
        return
    original(status, channel, parent)
k._publish_status = publish
print('idle will be lost')
"""


@needs_bwrap
def test_a_cell_whose_idle_is_lost_ends_with_a_note_not_at_its_timeout(tmp_path: Path) -> None:
    from kernel_agent.executors.kernel import KernelSession
    from kernel_agent.notebook.outputs import LOST_END_NOTE
    from kernel_agent.sandbox import make_launcher
    from kernel_agent.settings import Settings

    launcher = make_launcher(Settings(cwd=tmp_path), tmp_path)
    with KernelSession(cwd=tmp_path, launcher=launcher) as k:
        started = time.monotonic()
        result = k.execute(DROP_OWN_IDLE, timeout=30)
        took = time.monotonic() - started
        texts = [o.get("text", "") for o in result.outputs]
        assert result.status == "ok" and not result.restarted
        assert took < 10, f"took {took:.1f} s"
        assert "idle will be lost\n" in texts and LOST_END_NOTE in texts
        again = k.execute("print(6 * 7)", timeout=30)
        assert again.status == "ok" and again.outputs[0].text == "42\n"
