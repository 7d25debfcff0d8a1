"""``install_package`` under ``--install``: a wheel this test builds, never the network.

The host pip-installs into the session's site, which the sandboxed kernel sees
read-only on ``sys.path``; ``verify`` puts the recorded versions into its own site.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, run_cell, scripted_settings, text
from wheelfactory import TRY, build_wheel

from kernel_agent.agent import Agent
from kernel_agent.errors import ConfigError
from kernel_agent.events import RunFinished
from kernel_agent.notebook.verify import verify_notebook
from kernel_agent.sandbox import bwrap_problem
from kernel_agent.settings import Settings
from kernel_agent.tools.installs import InstallPolicy

pytestmark = pytest.mark.timeout(180)

SANDBOX = "none" if bwrap_problem()[0] else "bwrap"


@pytest.fixture
def index(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local find-links dir with tinypkg 1.0 and 2.0; pip may use nothing else."""
    where = tmp_path_factory.mktemp("wheels")
    build_wheel(where, "tinypkg", "1.0", "VALUE = 'one'\n")
    build_wheel(where, "tinypkg", "2.0", "VALUE = 'two'\n")
    build_wheel(where, "otherpkg", "0.1", "VALUE = 'other'\n")
    for path in (where, *where.iterdir()):  # pip reads them as an unprivileged uid
        path.chmod(0o755 if path.is_dir() else 0o644)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(where))
    return where


def settings_for(fake: FakeLLM, tmp_path: Path, **kw: Any) -> Settings:
    return scripted_settings(fake, tmp_path, **(dict(sandbox=SANDBOX, levers="none") | kw))


def run(fake: FakeLLM, tmp_path: Path, approve=None, **kw):
    with Agent(settings_for(fake, tmp_path, **kw), approve=approve) as agent:
        events = list(agent.run("install it"))
    assert isinstance(events[-1], RunFinished)
    return events[-1].result


def test_policy_never_is_the_default_and_names_the_policy(fake_llm, tmp_path, index):
    fake_llm.enqueue(run_cell(TRY.format(names=["tinypkg"])), text("done"))
    result = run(fake_llm, tmp_path)
    said = result.cells[0].outputs[0]["text"]
    assert "refused: install_package('tinypkg') refused by the install policy 'never'" in said
    assert "--install any" in said


def test_allow_list_installs_into_a_read_only_site_and_records_the_version(
    fake_llm, tmp_path, index
):
    fake_llm.enqueue(
        run_cell(
            TRY.format(names=["tinypkg==1.0", "otherpkg"])
            + "import tinypkg, os\nprint(tinypkg.VALUE, os.access(tinypkg.__file__, os.W_OK))"
        ),
        text("done"),
    )
    result = run(fake_llm, tmp_path, install="allow:tinypkg")
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert lines[0] == "installed tinypkg 1.0"
    assert "otherpkg" in lines[1] and "the policy allows only tinypkg" in lines[1]
    # read-only for the sandboxed kernel (root without a sandbox may write anywhere)
    assert lines[2] == ("one False" if SANDBOX == "bwrap" else "one True")
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"]["installs"] == {"tinypkg": "1.0"}
    calls = nb.cells[1].metadata["kernel_agent"]["tool_calls"]
    assert [(c["tool"], c["ok"]) for c in calls] == [("install", True), ("install", False)]


def test_ask_goes_through_the_approval_callback(fake_llm, tmp_path, index):
    asked: list[str] = []

    def approve(code: str, step: int):
        if code.startswith("install_package"):
            asked.append(code)
            return ("run", None) if "tinypkg" in code else ("skip", None)
        return ("run", code)

    fake_llm.enqueue(run_cell(TRY.format(names=["tinypkg", "otherpkg"])), text("done"))
    result = run(fake_llm, tmp_path, approve=approve, install="ask")
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert lines == [
        "installed tinypkg 2.0",
        "refused: install_package('otherpkg'): the user declined",
    ]
    assert len(asked) == 2


def test_a_missing_package_is_one_clear_error(fake_llm, tmp_path, index):
    fake_llm.enqueue(run_cell(TRY.format(names=["nosuchpkg", "not a name"])), text("done"))
    result = run(fake_llm, tmp_path, install="any")
    lines = result.cells[0].outputs[0]["text"].splitlines()
    assert lines[0].startswith("refused: pip could not install nosuchpkg (wheels only): ERROR:"), (
        lines
    )
    assert lines[1] == "refused: install_package: 'not a name' is not a package name"


def test_verify_reinstalls_the_recorded_versions(fake_llm, tmp_path, index):
    fake_llm.enqueue(
        run_cell("install_package('tinypkg==1.0')"),
        run_cell("import tinypkg\nprint(tinypkg.VALUE)"),
        text("done"),
    )
    result = run(fake_llm, tmp_path, install="any", verify=True)
    assert result.verify is not None and result.verify["verdict"] == "reproduced", result.verify
    nb = nbformat.read(result.notebook, as_version=4)
    assert nb.metadata["kernel_agent"]["installs"] == {"tinypkg": "1.0"}


def test_verify_of_a_tool_call_fails_clearly_instead_of_hanging(fake_llm, tmp_path):
    def answer() -> int:
        return 42

    fake_llm.enqueue(run_cell("print(call_tool('answer'))"), text("done"))
    with Agent(settings_for(fake_llm, tmp_path, verify=True), tools=[answer]) as agent:
        events = list(agent.run("call it"))
    result = events[-1].result
    assert result.cells[0].outputs[0]["text"] == "42\n"
    assert result.verify["verdict"] == "differs"
    # the re-run's own outputs say why, at once
    report = verify_notebook(result.clean_notebook, write=tmp_path / "rerun.ipynb", timeout=30)
    assert report.total_s < 20
    rerun = nbformat.read(tmp_path / "rerun.ipynb", as_version=4)
    error = [c for c in rerun.cells if c.cell_type == "code"][0].outputs[0]
    assert error["ename"] == "NoHostListening"
    assert "no kernel-agent host is listening to this kernel" in error["evalue"]


def test_policy_parsing():
    assert str(InstallPolicy.parse("allow:Foo_Bar, baz")) == "allow:baz,foo-bar"
    assert InstallPolicy.parse("any").mode == "any"
    for bad in ("sometimes", "allow:", ""):
        if bad == "":
            assert InstallPolicy.parse(bad).mode == "never"
            continue
        with pytest.raises(ConfigError, match="--install must be"):
            InstallPolicy.parse(bad)
