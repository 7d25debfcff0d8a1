"""``install_package`` on a gateway kernel: the host's policy decides, pip runs in the kernel.

A real Jupyter Kernel Gateway on 127.0.0.1, whose kernels' environment says where their
package index is (``PIP_NO_INDEX`` and ``PIP_FIND_LINKS`` to wheels this test builds: no
network). The agent runs with the scripted model server.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text
from gateway_server import EnterpriseGateway, KernelGateway, _Gateway, eg_python
from wheelfactory import TRY, build_wheel

from kernel_agent.agent import Agent
from kernel_agent.events import RunFinished

pytestmark = pytest.mark.timeout(240)
GW_TOKEN = "remote-installs-token"


@pytest.fixture(scope="module", params=["kernel-gateway", "enterprise-gateway"])
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Gateway]:
    """A gateway whose kernels install from a local find-links dir only (EG: its own venv)."""
    if request.param == "enterprise-gateway":
        eg_python()  # a skip saying why when EG was never installed
    wheels = tmp_path_factory.mktemp("kernel-wheels")
    build_wheel(wheels, "tinypkg", "1.0", "VALUE = 'one'\n")
    build_wheel(wheels, "tinypkg", "2.0", "VALUE = 'two'\n")
    build_wheel(wheels, "otherpkg", "0.1", "VALUE = 'other'\n")
    root = tmp_path_factory.mktemp(f"{request.param}-root")
    kind = EnterpriseGateway if request.param == "enterprise-gateway" else KernelGateway
    with pytest.MonkeyPatch.context() as mp:  # the gateway's kernels inherit its environment
        mp.setenv("PIP_NO_INDEX", "1")
        mp.setenv("PIP_FIND_LINKS", str(wheels))
        gw = kind(root, GW_TOKEN).start()
    yield gw
    gw.stop()


def run_remote(fake: FakeLLM, tmp_path: Path, kg: _Gateway, **kw: Any) -> Any:
    view = tmp_path / "view"
    view.mkdir(parents=True, exist_ok=True)
    settings = scripted_settings(
        fake, tmp_path, cwd=view, gateway_url=kg.url, gateway_token=GW_TOKEN, levers="none", **kw
    )
    with Agent(settings) as agent:
        events = list(agent.run("install it"))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result


def test_allow_list_installs_into_the_remote_kernels_own_site(fake_llm, tmp_path, gateway):
    fake_llm.enqueue(
        run_cell(
            TRY.format(names=["tinypkg==1.0", "otherpkg"])
            + "import os, sys, tinypkg\nsite = os.path.dirname(os.path.dirname(tinypkg.__file__))\n"
            "print(tinypkg.VALUE, os.path.basename(site).startswith('kernel-agent-site-'), "
            "site in sys.path, os.getcwd() != site)"
        ),
        text("done"),
    )
    result = run_remote(fake_llm, tmp_path, gateway, install="allow:tinypkg")
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert lines[0] == "installed tinypkg 1.0", lines
    assert "otherpkg" in lines[1] and "the policy allows only tinypkg" in lines[1]
    assert lines[2] == "one True True True"
    assert importlib.util.find_spec("tinypkg") is None  # nothing landed on this host
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"]["installs"] == {"tinypkg": "1.0"}
    calls = nb.cells[1].metadata["kernel_agent"]["tool_calls"]
    assert [(c["tool"], c["ok"]) for c in calls] == [
        ("install", True),
        ("installed", True),
        ("install", False),
    ]


def test_never_refuses_and_a_missing_package_is_one_clear_error(fake_llm, tmp_path, gateway):
    fake_llm.enqueue(run_cell(TRY.format(names=["tinypkg"])), text("done"))
    said = run_remote(fake_llm, tmp_path, gateway).cells[0].outputs[0]["text"]
    assert "refused: install_package('tinypkg') refused by the install policy 'never'" in said

    fake_llm.enqueue(run_cell(TRY.format(names=["nosuchpkg", "tinypkg==2.0"])), text("done"))
    result = run_remote(fake_llm, tmp_path / "two", gateway, install="any")
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert lines[0].startswith("refused: install_package('nosuchpkg'): pip failed in the kernel")
    assert lines[1] == "installed tinypkg 2.0"
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"]["installs"] == {"tinypkg": "2.0"}
