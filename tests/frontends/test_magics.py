"""``%load_ext kernel_agent``: the magics in a real notebook kernel and in terminal IPython.

The model is the scripted OpenAI-compatible server (``fake_llm``); the kernel is a
real ipykernel driven by nbclient, or an IPython shell in this process, or a
terminal ``ipython`` subprocess.
"""

from __future__ import annotations

import builtins
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeLLM, fenced, run_cell, text
from inkernel import execute, kernel_env
from IPython.core.interactiveshell import InteractiveShell
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from kernel_agent.frontends.magics import AgentResult

pytestmark = pytest.mark.timeout(120)

PLOT_CODE = (
    "import matplotlib.pyplot as plt\n"
    "mean_y = df['y'].mean()\n"
    "print(f'mean of y: {mean_y:.3f}')\n"
    "df.plot(x='x', y='y', title='y against x')\n"
    "plt.show()"
)


def free_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stream_text(cell: Any, name: str = "stdout") -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == name)


def one_line_error(cell: Any) -> str:
    """The cell's only error output, which must be a single line."""
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    assert len(errors[0].traceback) == 1 and "\n" not in errors[0].traceback[0], errors[0].traceback
    return str(errors[0].traceback[0])


# ---------------------------------------------------------------- a real notebook
def test_agent_cell_in_a_notebook_works_on_the_users_dataframe(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.enqueue(
        run_cell(PLOT_CODE, content="I'll compute the mean and plot y against x."),
        text("The mean of y is **5.250**; the plot shows y rising with x."),
    )
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext kernel_agent"),
            new_code_cell(
                "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3, 4], 'y': [2.0, 4.5, 6.0, 8.5]})"
            ),
            new_code_cell(
                f"%%agent --base-url {fake_llm.base_url} --model test --protocol tools --notebook-dir transcripts\n"
                "Plot y against x and tell me the mean of y."
            ),
            new_code_cell(
                "print(mean_y * 2)\n"
                "print(type(_agent_result).__name__, _agent_result.status, _agent_result.notebook)\n"
                "print(df.shape)"
            ),
        ]
    )
    execute(nb, tmp_path)
    agent_cell = nb.cells[2]
    # the agent's code used the user's DataFrame; its print and its plot are inline in the cell
    assert "mean of y: 5.250" in stream_text(agent_cell)
    pngs = [o for o in agent_cell.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1
    markdown = [
        o.data["text/markdown"] for o in agent_cell.outputs if "text/markdown" in o.get("data", {})
    ]
    assert any("```python" in m and "df['y'].mean()" in m for m in markdown), "the code is shown"
    assert any("I'll compute the mean" in m for m in markdown), "the model's prose streamed in"
    assert any("The mean of y is **5.250**" in m for m in markdown), "the answer"
    assert any("transcript" in m for m in markdown)
    # the model was told about df before it wrote code, and saw what its cell printed
    first_task = fake_llm.requests[0]["messages"][-1]["content"]
    assert "df (DataFrame, shape (4, 2), columns x, y)" in first_task
    tool_reply = fake_llm.requests[1]["messages"][-1]
    assert tool_reply["role"] == "tool" and "mean of y: 5.250" in tool_reply["content"]
    assert (
        "new: mean_y" in tool_reply["content"]
        and "df" not in tool_reply["content"].split("Variables")[-1]
    )
    # the next cell sees the agent's variable, _agent_result, and the user's df intact
    after = stream_text(nb.cells[3]).splitlines()
    assert after[0] == "10.5"
    assert after[1].startswith("AgentResult ok ")
    assert after[2] == "(4, 2)"
    # a transcript was written for the run, with the code and its image
    transcript = Path(after[1].split(" ", 2)[2])
    transcript = transcript if transcript.is_absolute() else tmp_path / transcript
    assert transcript.parent == tmp_path / "transcripts"
    record = nbformat.read(transcript, as_version=4)
    nbformat.validate(record)
    code = [c for c in record.cells if c.cell_type == "code"]
    assert [c.source for c in code] == [PLOT_CODE]
    assert any("image/png" in o.get("data", {}) for o in code[0].outputs)
    assert record.metadata["kernel_agent"]["sandbox"]["mode"] == "none"
    assert record.metadata["kernelspec"]["name"] == "python3"
    fake_llm.assert_drained()


def test_bad_input_gives_one_line_and_the_kernel_and_namespace_survive(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext kernel_agent\nkeep = 41"),
            new_code_cell("%%agent\n   \n"),
            new_code_cell("%agent --frobnicate now"),
            new_code_cell(
                f"%agent --base-url {dead} --model test --notebook-dir transcripts summarise keep"
            ),
            new_code_cell("%agent --sandbox bwrap do it"),
            new_code_cell("%agent --keep-kernel do it"),
            new_code_cell("%agent --base-url 'unclosed do it"),
            new_code_cell(
                "print(keep + 1, sorted(k for k in globals() if k.startswith('_agent')))"
            ),
            # --approve where the front end takes no input (nbclient): stop, run nothing
            new_code_cell(
                f"%agent --base-url {fake_llm.base_url} --model test --protocol tools --approve make it"
            ),
            new_code_cell("print('made' in globals(), _agent_result.status)"),
        ]
    )
    fake_llm.enqueue(run_cell("made = 1"))
    execute(nb, tmp_path, allow_errors=True)
    assert "the task is empty" in one_line_error(nb.cells[1])
    assert "unrecognized arguments: --frobnicate" in one_line_error(nb.cells[2])
    unreachable = one_line_error(nb.cells[3])
    assert unreachable.startswith("kernel-agent: error: cannot reach the endpoint at " + dead)
    assert "--sandbox does not apply" in one_line_error(nb.cells[4])
    assert "--keep-kernel does not apply" in one_line_error(nb.cells[5])
    assert "cannot read the options" in one_line_error(nb.cells[6])
    # the same kernel is alive, the user's variable intact, and no result was stored
    assert stream_text(nb.cells[7]) == "42 []\n"
    assert len(fake_llm.requests) == 1, "only the --approve run reached the model"
    shown = [o.data["text/plain"] for o in nb.cells[8].outputs if "data" in o]
    assert any("cannot ask for approval here" in t for t in shown)
    assert not [o for o in nb.cells[8].outputs if o.output_type == "error"]
    assert stream_text(nb.cells[9]) == "False stopped\n"


# ------------------------------------------------------------ terminal IPython
@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """A plain IPython shell in this process (what terminal IPython runs on)."""
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=config)
    sh.run_cell("%load_ext kernel_agent")
    yield sh
    InteractiveShell.clear_instance()


def agent_line(fake: FakeLLM, extra: str = "") -> str:
    return f"--base-url {fake.base_url} --model test --protocol tools {extra}".strip()


def test_terminal_line_magic_prints_progress_and_offers_the_code(
    shell: InteractiveShell, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.enqueue(
        run_cell(
            "doubled = [v * 2 for v in values]\nprint('doubled', doubled)", content="Doubling."
        ),
        text("Doubled: [2, 4, 6]."),
    )
    shell.run_cell("values = [1, 2, 3]")
    result = shell.run_cell(f"%agent {agent_line(fake_llm)} double the values")
    assert result.success
    out = capsys.readouterr().out
    assert "Doubling." in out and "── cell 1 ──" in out and "doubled [2, 4, 6]" in out
    assert "Doubled: [2, 4, 6]." in out and "transcript" in out
    assert shell.user_ns["doubled"] == [2, 4, 6]
    stored = shell.user_ns["_agent_result"]
    assert isinstance(stored, AgentResult) and stored.ok
    assert stored.code_cells == ["doubled = [v * 2 for v in values]\nprint('doubled', doubled)"]
    assert stored.notebook is not None and stored.notebook.is_file()
    assert (
        stored.notebook.parent.name == "notebooks" and "double-the-values" in stored.notebook.name
    )
    assert stored.clean_notebook is not None and stored.clean_notebook.is_file()
    assert shell.rl_next_input == stored.code, "terminal IPython pre-fills the next prompt"


def test_terminal_fenced_protocol_and_a_failing_cell(
    shell: InteractiveShell, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.enqueue(
        fenced("print(undefined_thing)"),
        fenced("print(len(values))", before="Fixed."),
        text("There are 3 values."),
    )
    shell.run_cell("values = [1, 2, 3]")
    assert shell.run_cell(
        f"%%agent {agent_line(fake_llm).replace('tools', 'fenced')} --no-next-input\ncount them"
    ).success
    out = capsys.readouterr().out
    assert "NameError" in out and "cell 1: error: NameError" in out
    stored = shell.user_ns["_agent_result"]
    assert [c.status for c in stored.run.cells] == ["error", "ok"]
    assert stored.code == "print(len(values))"
    assert getattr(shell, "rl_next_input", None) is None


def test_config_sets_defaults_shows_the_warning_and_resets(
    shell: InteractiveShell, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell(
        f"%agent_config --model cfg-model --base-url {fake_llm.base_url} --max-steps 1 --notebook-dir runs"
    )
    shown = capsys.readouterr().out
    assert "cfg-model  (%agent_config)" in shown and "UNSANDBOXED" in shown
    assert "max steps     1  (%agent_config)" in shown
    fake_llm.enqueue(run_cell("a = 1"), run_cell("b = 2"))
    assert shell.run_cell("%agent --protocol tools set a").success
    stored = shell.user_ns["_agent_result"]
    assert stored.status == "max_steps" and len(stored.code_cells) == 1
    assert stored.notebook.parent == Path("runs")
    assert fake_llm.requests[0]["model"] == "cfg-model"
    # a run's own option wins over the default
    fake_llm.enqueue(run_cell("c = 3"), text("done"))
    assert shell.run_cell("%agent --protocol tools --model other --max-steps 5 set c").success
    assert fake_llm.requests[-1]["model"] == "other" and shell.user_ns["c"] == 3
    shell.run_cell("%agent_config --reset")
    assert "(%agent_config)" not in capsys.readouterr().out
    bad = shell.run_cell("%agent_config --max-steps 0")
    assert not bad.success
    printed = capsys.readouterr()
    assert "max steps must be at least 1" in printed.out + printed.err


def test_approval_asks_in_the_shells_thread(
    shell: InteractiveShell,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = iter(["s", "e", "edited = True", ".", ""])
    asked: list[str] = []

    def fake_input(prompt: str = "") -> str:
        asked.append(prompt)
        return next(answers)

    monkeypatch.setattr(builtins, "input", fake_input)
    fake_llm.enqueue(
        run_cell("skipped = True"),
        run_cell("original = True"),
        run_cell("third = True"),
        text("ok"),
    )
    assert shell.run_cell(f"%agent {agent_line(fake_llm)} --approve go").success
    assert [a for a in asked if a.startswith("cell")] == [
        "cell 1: [r]un, [s]kip, [e]dit, [q]uit? ",
        "cell 2: [r]un, [s]kip, [e]dit, [q]uit? ",
        "cell 3: [r]un, [s]kip, [e]dit, [q]uit? ",
    ]
    assert "skipped" not in shell.user_ns and "original" not in shell.user_ns
    assert shell.user_ns["edited"] is True and shell.user_ns["third"] is True
    assert "cell 1 skipped" in capsys.readouterr().out


def test_help_and_unload(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert shell.run_cell("%agent --help").success
    assert "--base-url" in capsys.readouterr().out
    shell.run_cell("%unload_ext kernel_agent")
    assert "agent" not in shell.magics_manager.magics["cell"]
    assert "agent_config" not in shell.magics_manager.magics["line"]


def test_terminal_ipython_subprocess(fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.enqueue(run_cell("print('sum is', sum(values))"), text("The sum is 6."))
    code = (
        "%load_ext kernel_agent\n"
        "values = [1, 2, 3]\n"
        f"%agent {agent_line(fake_llm)} add the values\n"
        "print('RESULT', _agent_result.status, _agent_result.answer)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=nocolor", "-c", code],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sum is 6" in proc.stdout
    assert "RESULT ok The sum is 6." in proc.stdout
    written = sorted(p.name for p in (tmp_path / "notebooks").glob("*.ipynb"))
    assert len(written) == 2 and written[0].endswith("-add-the-values.clean.ipynb")
    assert written[1].endswith("-add-the-values.ipynb"), "the transcript and its clean notebook"
    assert fake_llm.requests[0]["model"] == "test"


def test_a_retried_reply_is_retracted_from_the_live_display(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The streamed text of a failed attempt goes; the retry's text does not append to it."""
    import IPython.display

    from kernel_agent.events import ModelDelta, ModelRetracted
    from kernel_agent.frontends.magics import _View

    shown: list[str] = []

    class Handle:
        def update(self, bundle: dict[str, str], raw: bool = False) -> None:
            shown.append(bundle["text/plain"])

    def display(bundle: dict[str, str], raw: bool = False, display_id: bool = False) -> Handle:
        shown.append(bundle["text/plain"])
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    shell = type("Shell", (), {"kernel": object()})()
    view = _View(shell)
    view(ModelDelta("partial words "))
    view(ModelRetracted())
    view(ModelDelta("whole reply"))
    assert shown[0] == "partial words " and shown[-1] == ""
    assert view._end_stream() and shown[-1] == "whole reply"
