"""The agent end to end on a real Kernel Gateway and Enterprise Gateway, with the scripted model."""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest
from fake_openai import run_cell, text
from gateway_server import EnterpriseGateway, KernelGateway, eg_python

from kernel_agent.agent import Agent
from kernel_agent.errors import GatewayError
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(180)
TOKEN = "agent-gateway-token"


@pytest.fixture(scope="module", params=["kernel-gateway", "enterprise-gateway"])
def gateway(request, tmp_path_factory):
    """Each gateway in turn (EG from its own venv: ``make eg-venv``)."""
    workdir = tmp_path_factory.mktemp(f"{request.param}-agent")
    if request.param == "enterprise-gateway":
        eg_python()  # a skip saying why when EG was never installed
        gw = EnterpriseGateway(workdir, TOKEN, time_to_dead=1.0).start()
    else:
        gw = KernelGateway(workdir, TOKEN, ("--KernelRestarter.time_to_dead=1",)).start()
    yield gw
    gw.stop()


def settings_for(fake, tmp_path, gateway_url, token=TOKEN, **kw):
    return Settings.from_env(
        env={},
        base_url=fake.base_url,
        model="m",
        api_key="k",
        cwd=tmp_path,
        notebook_dir=tmp_path,
        gateway_url=gateway_url,
        gateway_token=token,
        **kw,
    )


def test_agent_runs_on_the_gateway(fake_llm, tmp_path, gateway):
    fake_llm.enqueue(
        run_cell("import os\nx = 7\nprint(os.getpid())"), run_cell("print(x * 6)"), text("42")
    )
    with Agent(settings_for(fake_llm, tmp_path, gateway.url)) as agent:
        result = agent.run_to_end("compute")
    assert result.status == "ok" and result.cells[1].outputs[0]["text"] == "42\n"
    assert int(result.cells[0].outputs[0]["text"]) != os.getpid()
    nb = nbformat.read(result.notebook, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernel_agent"]["sandbox"]["note"].startswith(
        "remote kernel on http://127.0.0.1"
    )
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_wrong_token_is_one_clear_error(fake_llm, tmp_path, gateway):
    with Agent(settings_for(fake_llm, tmp_path, gateway.url, token="wrong")) as agent:
        with pytest.raises(GatewayError, match="token"):
            agent.run_to_end("compute")


def test_wrong_url_from_the_cli(fake_llm, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_AGENT_"))}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernel_agent",
            "run",
            "--base-url",
            fake_llm.base_url,
            "--model",
            "m",
            "--gateway-url",
            "http://127.0.0.1:9",
            "--gateway-token",
            "t",
            "--cwd",
            str(tmp_path),
            "go",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == GatewayError.exit_code
    assert proc.stderr.strip().splitlines()[-1].startswith("kernel-agent: error:")
    assert "Traceback" not in proc.stderr


def test_gateway_gone_mid_run_keeps_the_transcript(fake_llm, tmp_path):
    kg = KernelGateway(tmp_path / "kg", TOKEN, ())
    (tmp_path / "kg").mkdir()
    kg.start()
    fake_llm.enqueue(
        run_cell("a = 1"), lambda request: (kg.stop(), run_cell("print(a)"))[1], text("never")
    )
    try:
        with Agent(settings_for(fake_llm, tmp_path, kg.url, cell_timeout=20)) as agent:
            with pytest.raises(GatewayError):
                for _ in agent.run("go"):
                    pass
            path = agent.transcript.path
    finally:
        kg.stop()
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells if c.cell_type == "code"][0] == "a = 1"
