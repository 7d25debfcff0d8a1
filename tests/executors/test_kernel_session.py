"""KernelSession against real kernels: state, outputs, fidelity with nbclient, failures."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import PINNED_KERNEL_ENV, kernel_env
from executor_contract import KernelContract
from nbclient import NotebookClient

from kernel_agent.errors import ConfigError, KernelNotFound, KernelStartError
from kernel_agent.executors.base import AsyncExecutor
from kernel_agent.executors.kernel import AsyncKernelSession, KernelSession

pytestmark = pytest.mark.timeout(120)


def texts(result: Any) -> list[str]:
    """Each output as text: stream text, or the text/plain of a display or result."""
    return [o.text if o.output_type == "stream" else o.data["text/plain"] for o in result.outputs]


class TestLocalKernelContract(KernelContract):
    """The shared executor contract on a local kernel (no launcher: the tests' own)."""

    @pytest.fixture
    def executor(self, kernel: Any) -> Any:
        return kernel

    @pytest.fixture
    def fresh_executor(self, fresh_kernel: Any) -> Any:
        return fresh_kernel


# ------------------------------------------------------------------ basics
def test_state_is_kept_across_cells(kernel: Any) -> None:
    first = kernel.execute("a = 1")
    second = kernel.execute("a += 1\nprint('a is', a)")
    third = kernel.execute("a")
    assert [r.status for r in (first, second, third)] == ["ok", "ok", "ok"]
    assert texts(second) == ["a is 2\n"] and texts(third) == ["2"]
    assert second.execution_count == first.execution_count + 1
    assert third.execution_count == first.execution_count + 2
    assert third.outputs[0].execution_count == third.execution_count
    assert third.duration >= 0 and third.error is None and not third.restarted


def test_session_reports_its_kernel(kernel: Any) -> None:
    assert kernel.kernelspec == {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    assert kernel.language_info["name"] == "python"
    assert kernel.language_info["file_extension"] == ".py"
    assert kernel.is_alive()
    assert isinstance(kernel.aio, AsyncExecutor)


def test_every_mime_type(kernel: Any) -> None:
    code = r"""
from IPython.display import HTML, JSON, SVG, Latex, Markdown, display
import matplotlib.pyplot as plt
display(HTML("<b>bold</b>"))
display(Latex(r"$\alpha^2$"))
display(Markdown("**md**"))
display(JSON({"a": [1, 2]}))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><circle r="3"/></svg>'))
plt.plot([1, 3, 2]); plt.show()
"plain"
"""
    result = kernel.execute(code, timeout=60)
    assert result.ok, result.error
    found = {mime: value for o in result.outputs for mime, value in o.get("data", {}).items()}
    assert found["text/html"] == "<b>bold</b>"
    assert found["text/latex"] == r"$\alpha^2$"
    assert found["text/markdown"] == "**md**"
    assert found["application/json"] == {"a": [1, 2]}
    assert found["image/svg+xml"].startswith("<svg")
    assert found["image/png"].startswith("iVBORw0KGgo")  # base64 PNG, as nbformat stores it
    assert found["text/plain"] == "'plain'"
    assert [o.output_type for o in result.outputs][-1] == "execute_result"


def test_on_output_streams_pieces_while_the_cell_runs(kernel: Any) -> None:
    seen: list[tuple[float, str]] = []
    code = "import time\nprint('early', flush=True)\ntime.sleep(0.6)\nprint('late')"
    result = kernel.execute(code, on_output=lambda node: seen.append((time.monotonic(), node.text)))
    done = time.monotonic()
    assert [text for _, text in seen] == ["early\n", "late\n"]
    assert done - seen[0][0] > 0.4  # "early" arrived before the cell finished
    assert texts(result) == ["early\nlate\n"]


def test_clear_output_in_a_real_kernel(kernel: Any) -> None:
    waited = kernel.execute(
        "from IPython.display import clear_output\n"
        "print('gone')\nclear_output(wait=True)\nprint('kept')"
    )
    assert texts(waited) == ["kept\n"]
    now = kernel.execute("print('gone')\nclear_output()")
    assert now.outputs == []


def test_update_display_across_cells(kernel: Any) -> None:
    first = kernel.execute("h = display('first', display_id=True)")
    second = kernel.execute("h.update('second')")
    assert texts(first) == ["'second'"]  # the earlier cell's output was patched
    assert second.outputs == []


def test_error_is_kept_with_plain_traceback(kernel: Any) -> None:
    result = kernel.execute("print('before')\ndef f():\n    raise ValueError('bad value')\nf()")
    assert result.status == "error"
    assert (result.error.ename, result.error.evalue) == ("ValueError", "bad value")
    plain = result.error.plain_traceback
    assert "\x1b" not in plain
    assert "ValueError: bad value" in plain and "----> 4 f()" in plain
    assert [o.output_type for o in result.outputs] == ["stream", "error"]
    assert any("\x1b[" in line for line in result.outputs[1].traceback)  # the notebook keeps colour
    assert kernel.execute("1 + 1").ok


def test_input_fails_fast_and_the_session_goes_on(kernel: Any) -> None:
    result = kernel.execute("name = input('name? ')", timeout=60)
    assert result.status == "error"
    assert result.error.ename == "StdinNotImplementedError"
    assert result.duration < 5
    assert texts(kernel.execute("'still here'")) == ["'still here'"]


# ------------------------------------------------------------ nbclient fidelity
FIDELITY_CELLS = [
    "print('hello')\nprint('world')",
    "import sys\nsys.stderr.write('warning\\n')",
    "for i in range(5):\n    print(f'\\r{i * 25}%', end='', flush=True)\nprint()",
    "x = 6 * 7\nx",
    "from IPython.display import HTML, JSON, Latex, Markdown, display\n"
    "display(HTML('<i>h</i>'), Markdown('*m*'), Latex('$x$'), JSON({'k': 1}))",
    "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(2, 2))\n"
    "ax.plot([1, 2, 3])\nplt.show()",
    "h = display('first', display_id=True)",
    "h.update('second')",
    "display('a', display_id='same')\ndisplay('b', display_id='same')",
    "from IPython.display import clear_output\n"
    "print('gone')\nclear_output(wait=True)\nprint('kept')",
    "object()",
    "%time sum(range(1000))",
    "def g():\n    return 1 / 0\ng()",
    "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})",
]


def normalize(outputs: list[Any]) -> Any:
    """Scrub what differs between two runs: addresses, timings, cell and file names."""
    text = json.dumps(outputs, sort_keys=True, ensure_ascii=False)
    text = re.sub(r"0x[0-9a-fA-F]+", "0xADDR", text)
    text = re.sub(r"Cell In\[\d+\]", "Cell In[N]", text)
    text = re.sub(r"ipykernel_\d+/\d+\.py", "ipykernel_P/F.py", text)
    text = re.sub(r"\d[\d.e+]* ?(ns|µs|μs|us|ms|s)\b", "T", text)
    return json.loads(text)


def test_outputs_match_nbclient(
    fresh_kernel: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in PINNED_KERNEL_ENV.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in FIDELITY_CELLS])
    NotebookClient(
        nb,
        kernel_name="python3",
        timeout=60,
        allow_errors=True,
        coalesce_streams=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()

    session = fresh_kernel()
    results = [session.execute(code, timeout=60) for code in FIDELITY_CELLS]

    for code, cell, result in zip(FIDELITY_CELLS, nb.cells, results, strict=True):
        assert result.execution_count == cell.execution_count, code
        assert normalize(result.outputs) == normalize(cell.outputs), code
    # the cells above exercise what they should
    assert results[2].outputs[0].text == "100%\n"
    assert texts(results[6]) == ["'second'"]
    assert texts(results[8])[:2] == ["'b'", "'b'"]
    assert results[12].status == "error"


# ----------------------------------------------------- timeouts and deaths
def test_timeout_interrupts_and_keeps_state(fresh_kernel: Any) -> None:
    session = fresh_kernel()
    session.execute("kept = 'yes'")
    result = session.execute("import time\ntime.sleep(30)", timeout=1)
    assert result.status == "timeout"
    assert not result.restarted
    assert result.error.ename == "CellTimeoutError"
    assert "state is kept" in result.error.evalue
    assert result.duration < 10
    assert texts(session.execute("kept")) == ["'yes'"]


def test_loop_ignoring_sigint_gets_the_kernel_restarted(fresh_kernel: Any) -> None:
    session = fresh_kernel(interrupt_grace=1.0)
    session.execute("lost = 1")
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    start = time.monotonic()
    result = session.execute(code, timeout=1)
    assert time.monotonic() - start < 15
    assert result.status == "timeout" and result.restarted
    assert "restarted" in result.error.evalue
    after = session.execute("1 + 1")
    assert after.ok and texts(after) == ["2"]
    assert session.execute("lost").error.ename == "NameError"  # state was lost, as reported


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import os\nos._exit(1)", "exit code 1"),
        ("import ctypes\nctypes.string_at(0)", "SIGSEGV"),
    ],
    ids=["os_exit", "segfault"],
)
def test_kernel_death_is_detected_quickly(fresh_kernel: Any, code: str, reason: str) -> None:
    session = fresh_kernel()
    start = time.monotonic()
    result = session.execute(code, timeout=60)
    elapsed = time.monotonic() - start
    assert result.status == "died"
    assert elapsed < 5  # detected by the liveness check, not the 60 s timeout
    assert result.restarted
    assert result.error.ename == "DeadKernelError" and reason in result.error.evalue
    assert texts(session.execute("'alive again'")) == ["'alive again'"]


# ------------------------------------------------------------------ secrets
SECRETS = {"OPENAI_API_KEY": "sk-test", "MY_TOKEN": "tok", "DB_PASSWORD": "pw"}
PROBE = "import os\nsorted(k for k in {names!r} if k in os.environ)"


def test_secrets_are_not_passed_to_the_kernel(
    fresh_kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**SECRETS, "HARMLESS_SETTING": "1"}.items():
        monkeypatch.setenv(name, value)
    names = [*SECRETS, "HARMLESS_SETTING"]
    plain = fresh_kernel(env=None)  # None: our own environment, allowlisted
    assert texts(plain.execute(PROBE.format(names=names))) == ["[]"]
    passed = fresh_kernel(env=None, env_passthrough=("MY_TOKEN", "HARMLESS_SETTING"))
    assert texts(passed.execute(PROBE.format(names=names))) == ["['HARMLESS_SETTING', 'MY_TOKEN']"]


# ---------------------------------------------------------------- bad input
def test_unknown_kernel_name(tmp_path: Path) -> None:
    session = KernelSession("no-such-kernel", cwd=tmp_path)
    with pytest.raises(KernelNotFound, match="no Jupyter kernel named 'no-such-kernel'"):
        session.start()


def test_missing_cwd(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        KernelSession(cwd=tmp_path / "missing")


@pytest.mark.parametrize("bad", [0, -1.5])
def test_non_positive_timeouts(kernel: Any, tmp_path: Path, bad: float) -> None:
    with pytest.raises(ConfigError, match="timeout must be positive"):
        kernel.execute("1", timeout=bad)
    with pytest.raises(ConfigError, match="startup timeout must be positive"):
        KernelSession(cwd=tmp_path, startup_timeout=bad)


def fake_kernelspec(root: Path, name: str, code: str) -> None:
    """A kernelspec under ``root`` (put on JUPYTER_PATH) whose kernel runs ``code``."""
    spec = root / "kernels" / name
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", code, "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": name}))


def test_kernel_that_exits_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_kernelspec(tmp_path / "share", "exits", "import sys; sys.exit(3)")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share"))
    session = KernelSession("exits", cwd=tmp_path, startup_timeout=60)
    start = time.monotonic()
    with pytest.raises(KernelStartError, match="'exits' exited while starting"):
        session.start()
    assert time.monotonic() - start < 10
    assert not session.is_alive()


def test_kernel_that_never_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_kernelspec(tmp_path / "share", "mute", "import time; time.sleep(60)")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share"))
    session = KernelSession("mute", cwd=tmp_path, startup_timeout=1.5)
    with pytest.raises(KernelStartError, match="'mute' did not answer within 1.5 s"):
        session.start()
    assert not session.is_alive()


def test_errors_are_one_line(tmp_path: Path) -> None:
    for make in (
        lambda: KernelSession("no-such-kernel", cwd=tmp_path).start(),
        lambda: KernelSession(cwd=tmp_path / "missing"),
    ):
        with pytest.raises(Exception) as info:
            make()
        assert "\n" not in str(info.value)


# ----------------------------------------------------------- async, bash
def test_async_api(tmp_path: Path) -> None:
    async def run() -> list[Any]:
        async with AsyncKernelSession(cwd=tmp_path, env=kernel_env()) as session:
            assert await session.is_alive()
            await session.execute("y = 2")
            result = await session.execute("y * 21")
            alive = await session.is_alive()
        return [result, alive, await session.is_alive()]

    result, alive, after = asyncio.run(run())
    assert result.ok and texts(result) == ["42"]
    assert alive and not after


def test_async_sessions_run_concurrently(tmp_path: Path) -> None:
    async def run() -> tuple[list[Any], float]:
        sessions = [AsyncKernelSession(cwd=tmp_path, env=kernel_env()) for _ in range(2)]
        await asyncio.gather(*(s.start() for s in sessions))
        try:
            start = time.monotonic()
            code = "import time\ntime.sleep(1)\n'done'"
            results = await asyncio.gather(*(s.execute(code) for s in sessions))
            return results, time.monotonic() - start
        finally:
            await asyncio.gather(*(s.shutdown() for s in sessions))

    results, elapsed = asyncio.run(run())
    assert [texts(r) for r in results] == [["'done'"], ["'done'"]]
    assert elapsed < 1.8  # waiting on one kernel does not block the other


def test_bash_kernel(fresh_kernel: Any) -> None:
    session = fresh_kernel("bash")
    assert session.kernelspec["language"] == "bash"
    assert texts(session.execute("echo hi")) == ["hi\n"]
    assert session.execute("GREETING=hello").ok
    assert texts(session.execute("echo $GREETING world")) == ["hello world\n"]
    assert session.execute("false").status == "error"
