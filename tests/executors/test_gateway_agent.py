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
PLANTED_ID = "5e4d1f6a-0000-4000-8000-000000000000"


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


def _cli_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KERNEL_"))}
    return {**env, **extra}


def _cli_run(fake, tmp_path, gateway, env):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kernel_agent",
            "run",
            "--format",
            "json",
            "--base-url",
            fake.base_url,
            "--model",
            "m",
            "--api-key",
            "k",
            "--gateway-url",
            gateway.url,
            "--cwd",
            str(tmp_path),
            "--notebook",
            str(tmp_path / "env.ipynb"),
            "go",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_the_cli_sends_kernel_vars_to_the_gateway_and_keeps_its_own(fake_llm, tmp_path, gateway):
    """KERNEL_* go with the start request, as Jupyter's gateway client sends them; the
    token and API key in KERNEL_AGENT_* never reach the kernel."""
    fake_llm.enqueue(
        run_cell(
            "import os\n"
            "print(os.environ.get('KERNEL_PROBE'), "
            "sorted(k for k in os.environ if 'AGENT' in k or 'secret' in os.environ[k]), "
            f"os.environ.get('KERNEL_ID') == {PLANTED_ID!r})"
        ),
        text("done"),
    )
    env = _cli_env(
        KERNEL_PROBE="sent",
        KERNEL_AGENT_GATEWAY_TOKEN=TOKEN,
        KERNEL_AGENT_MODEL="m",
        KERNEL_AGENT_SECRET_NOTE="secret",
        KERNEL_ID=PLANTED_ID,  # EG would give it to every kernel; attaching is by flag
    )
    proc = _cli_run(fake_llm, tmp_path, gateway, env)
    assert proc.returncode == 0, proc.stderr
    cells = nbformat.read(tmp_path / "env.ipynb", as_version=4).cells
    (cell,) = [c for c in cells if "KERNEL_PROBE" in c.source]
    assert "".join(o.get("text", "") for o in cell.outputs) == "sent [] False\n"


def test_a_user_enterprise_gateway_refuses_is_one_line_from_the_cli(
    fake_llm, tmp_path, gateway, request
):
    """EG refuses KERNEL_USERNAME values in its unauthorized_users (stock: root)."""
    env = _cli_env(KERNEL_AGENT_GATEWAY_TOKEN=TOKEN, KERNEL_USERNAME="nobody")
    if "enterprise" not in request.node.callspec.id:  # Kernel Gateway has no notion of users
        fake_llm.enqueue(run_cell("import os\nprint(os.environ['KERNEL_USERNAME'])"), text("ok"))
        proc = _cli_run(fake_llm, tmp_path, gateway, env)
        assert proc.returncode == 0, proc.stderr
        cells = nbformat.read(tmp_path / "env.ipynb", as_version=4).cells
        (cell,) = [c for c in cells if "KERNEL_USERNAME" in c.source]
        assert cell.outputs[0]["text"] == "nobody\n"
        return
    proc = _cli_run(fake_llm, tmp_path, gateway, env)
    assert proc.returncode == GatewayError.exit_code
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kernel-agent: error:") and "Traceback" not in proc.stderr
    assert "User 'nobody' is not authorized to start kernel" in last and "token" not in last
