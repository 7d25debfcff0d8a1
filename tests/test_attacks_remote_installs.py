"""Attacks on ``install_package`` in a gateway kernel: hostile names never reach the kernel's
pip, and the kernel's report of what it installed is checked before it is recorded.

A real Kernel Gateway on 127.0.0.1 whose kernels install from a local find-links dir (no
network); the kernel's ``subprocess.run`` is wrapped by the cell to count pip starts (and,
for the lying-report attacks, replaced by a fake pip that writes forged metadata).
"""

from __future__ import annotations

import nbformat
import pytest
from fake_openai import run_cell, text
from test_remote_installs import gateway, run_remote  # noqa: F401 - the module's fixture

from kernel_agent.errors import InstallError
from kernel_agent.tools.remote_installs import RemoteInstalls, remote_pip_args
from kernel_agent.tools.requirements import Pin

pytestmark = pytest.mark.timeout(240)

HOSTILE = [
    "--index-url=http://evil.invalid/simple",
    "-e .",
    "tinypkg; rm -rf /",
    "tinypkg --target /",
    "tinypkg==1.0 --pre",
    "tinypkg\n--pre",
    "../../wheels/tinypkg-1.0-py3-none-any.whl",
    "tinypkg-1.0-py3-none-any.whl",
    "tinypkg @ http://evil.invalid/x.whl",
    "file:///etc/passwd",
    "tinypkg[evil]",
    "tinypkg>=1.0",
    "tinypkg==1.0-evil",
    "x" * 300,
]

COUNT_PIP = (
    "import subprocess\n_pips = []\n_run = subprocess.run\n"
    "def _counting(argv, *a, **k):\n    _pips.append(list(argv))\n    return _run(argv, *a, **k)\n"
    "subprocess.run = _counting\n"
)


def test_hostile_names_are_refused_before_anything_reaches_the_kernel(
    fake_llm,
    tmp_path,
    gateway,  # noqa: F811
):
    code = (
        COUNT_PIP + f"for name in {HOSTILE!r}:\n"
        "    try:\n        install_package(name)\n        print('INSTALLED', name)\n"
        "    except ToolError as e:\n        print('refused:', str(e)[:60])\n"
        "print('pip runs:', len(_pips))"
    )
    fake_llm.enqueue(run_cell(code), text("done"))
    result = run_remote(fake_llm, tmp_path, gateway, install="any")
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert "INSTALLED" not in "\n".join(lines)
    assert sum(line.startswith("refused:") for line in lines) == len(HOSTILE), lines
    assert lines[-1] == "pip runs: 0"  # refused on the host: the kernel's pip never started
    nb = nbformat.read(result.notebook, as_version=4)
    assert "installs" not in nb.metadata["kernel_agent"]


FAKE_PIP = (
    "import os, subprocess\n"
    "def _fake_pip(argv, *a, **k):\n"
    "    site = argv[argv.index('--target') + 1]\n"
    "    for name, version in {dists!r}:\n"
    "        info = os.path.join(site, f'{{name}}-x.dist-info')\n"
    "        os.makedirs(info, exist_ok=True)\n"
    "        open(os.path.join(info, 'METADATA'), 'w').write(f'Name: {{name}}\\nVersion: {{version}}\\n')\n"
    "    return subprocess.CompletedProcess(argv, 0, '', '')\n"
    "subprocess.run = _fake_pip\n"
    "try:\n    install_package('tinypkg')\n    print('installed')\n"
    "except ToolError as e:\n    print('refused:', e)\n"
)


@pytest.mark.parametrize(
    "dists, recorded",
    [
        ([("tinypkg", "1.0"), ("evilpkg", "6.6.6")], {"tinypkg": "1.0"}),  # no extra names
        ([("tinypkg", "1.0; rm -rf /")], None),  # a version that is not one
        ([("otherpkg", "0.1")], None),  # not what was asked for
    ],
)
def test_a_kernels_lying_install_report_is_checked(
    fake_llm,
    tmp_path,
    gateway,  # noqa: F811
    dists,
    recorded,
):
    fake_llm.enqueue(run_cell(FAKE_PIP.format(dists=dists)), text("done"))
    result = run_remote(fake_llm, tmp_path, gateway, install="allow:tinypkg")
    said = result.cells[0].outputs[0]["text"]
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"].get("installs") == recorded, said
    assert said.startswith("installed" if recorded else "refused:"), said


def test_a_report_nobody_asked_for_is_refused(fake_llm, tmp_path, gateway):  # noqa: F811
    """The kernel sends an ``installed`` report on its own comm: nothing is recorded."""
    code = (
        "import comm, time\n"
        "c = comm.create_comm(target_name='kernel_agent')\n"
        "c.send({'op': 'installed', 'id': 'forged-1', 'name': 'evilpkg', 'ok': True,\n"
        "        'installed': {'evilpkg': '6.6.6'}})\n"
        "time.sleep(1)\nprint('sent')"
    )
    fake_llm.enqueue(run_cell(code), text("done"))
    result = run_remote(fake_llm, tmp_path, gateway, install="any")
    nb = nbformat.read(result.notebook, as_version=4)
    assert "installs" not in nb.metadata["kernel_agent"]
    calls = nb.cells[1].metadata["kernel_agent"].get("tool_calls", [])
    assert [(c["tool"], c["ok"]) for c in calls] == [("installed", False)], calls


def test_remote_installs_units() -> None:
    args = remote_pip_args(Pin("tinypkg", "1.0"))
    assert args[:2] == ["--only-binary", ":all:"] and args[-2:] == ["--", "tinypkg==1.0"]
    ri = RemoteInstalls()
    with pytest.raises(InstallError, match="did not permit"):
        ri.report({"name": "tinypkg", "ok": True, "installed": {"tinypkg": "1.0"}})
    ri.instruct(Pin("tinypkg"))
    with pytest.raises(InstallError, match="malformed"):
        ri.report({"name": "tinypkg", "ok": True, "installed": {str(i): "1" for i in range(2000)}})
    ri.instruct(Pin("tinypkg"))
    with pytest.raises(InstallError, match="pip failed in the kernel: ERROR: nope"):
        ri.report({"name": "TinyPkg", "ok": False, "error": "x" * 10_000 + "\nERROR: nope"})
    ri.instruct(Pin("tinypkg"))  # terminal escapes from the kernel never reach the message
    with pytest.raises(InstallError) as caught:
        ri.report({"name": "tinypkg", "ok": False, "error": "\x1b[31mERROR: x\x1b[0m\x07\u202e"})
    assert str(caught.value).endswith("pip failed in the kernel: ERROR: x")
    ri.instruct(Pin("tinypkg"))
    assert ri.report({"name": "tinypkg", "ok": True, "installed": {"TinyPkg": "1.0"}}) == (
        "tinypkg",
        "1.0",
    )
    with pytest.raises(InstallError, match="did not permit"):  # a second report for one permit
        ri.report({"name": "tinypkg", "ok": True, "installed": {"tinypkg": "1.0"}})
