"""The in-process executor on a real IPython shell (in this process) and a real ipykernel."""

from __future__ import annotations

import base64
import io
import json
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from executor_contract import ExecutorContract
from inkernel import execute
from IPython.core.interactiveshell import InteractiveShell
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from kernel_agent.errors import ConfigError, KernelError
from kernel_agent.executors.base import AsyncExecutor
from kernel_agent.executors.inprocess import InProcessExecutor
from kernel_agent.kernel_state.namespace import NAMESPACE_EXPRESSION, parse_summary
from kernel_agent.syncify import BackgroundLoop


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=config)
    yield sh
    InteractiveShell.clear_instance()


@pytest.fixture(autouse=True)
def _default_sigint() -> Iterator[None]:
    """In-process timeouts need Python's default SIGINT handler, as an IPython kernel has
    it; a fixture of wider scope set up by an earlier test may have left another."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if before is not None:
        signal.signal(signal.SIGINT, before)


@pytest.fixture
def executor(shell: InteractiveShell) -> InProcessExecutor:
    return InProcessExecutor(shell)


def drive(executor: InProcessExecutor, *cells: tuple[str, float | None]) -> list[Any]:
    """Run cells the way the magic does: the agent's loop in a background thread,
    the code in this (the shell's) thread via call_in_consumer."""
    pieces: list[Any] = []

    async def agen() -> AsyncIterator[Any]:
        for code, timeout in cells:
            yield await executor.execute(
                code,
                timeout=timeout,
                on_output=pieces.append,
                user_expressions={"ns": NAMESPACE_EXPRESSION},
            )

    loop = BackgroundLoop()
    try:
        results = list(loop.iterate(agen()))
    finally:
        loop.close()
    return [results, pieces]


class _Driven:
    """The in-process executor driven as the magic drives it (its loop in a background
    thread, the code in this one), with the blocking ``execute`` the contract calls."""

    def __init__(self, aio: InProcessExecutor) -> None:
        self.aio = aio

    def __getattr__(self, name: str) -> Any:
        return getattr(self.aio, name)

    def execute(self, code: str, timeout: float | None = None, **kwargs: Any) -> Any:
        async def one() -> AsyncIterator[Any]:
            yield await self.aio.execute(code, timeout, **kwargs)

        loop = BackgroundLoop()
        try:
            (result,) = loop.iterate(one())
        finally:
            loop.close()
        return result


class TestInProcessContract(ExecutorContract):
    """The shared contract; restarts and kernel death do not apply to the user's own shell."""

    @pytest.fixture
    def executor(self, shell: InteractiveShell) -> _Driven:
        return _Driven(InProcessExecutor(shell))

    @pytest.fixture
    def fresh_executor(self, shell: InteractiveShell) -> Any:
        return lambda **_: _Driven(InProcessExecutor(shell))


def test_implements_the_executor_protocol(executor: InProcessExecutor) -> None:
    assert isinstance(executor, AsyncExecutor)
    assert executor.kernelspec["language"] == "python"
    assert executor.language_info["name"] == "python"
    assert executor.language_info["version"].count(".") == 2


def test_runs_in_the_users_namespace_and_reports_outputs(
    shell: InteractiveShell, executor: InProcessExecutor, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["user_data"] = [3, 4, 5]
    (first, second), pieces = drive(
        executor,
        (
            "total = sum(user_data)\nprint('total is', total)\n"
            "print('careful', file=__import__('sys').stderr)\ntotal * 2",
            None,
        ),
        ("total + 1", None),
    )
    assert first.status == "ok" and first.error is None
    assert [o.output_type for o in first.outputs] == ["stream", "stream", "execute_result"]
    assert first.outputs[0].text == "total is 12\n"
    assert first.outputs[1].name == "stderr"
    assert first.outputs[2].data["text/plain"] == "24"
    assert (first.execution_count, second.execution_count) == (1, 2)
    assert first.outputs[2].execution_count == 1
    assert second.outputs[0].data["text/plain"] == "13"
    assert shell.user_ns["total"] == 12  # the agent's variable is the user's now
    summary = parse_summary(first.user_expressions["ns"])
    assert summary is not None and summary["user_data"].len == 3 and summary["total"].value == "12"
    # the outputs still appeared as they normally do
    out = capsys.readouterr()
    assert "total is 12" in out.out and "careful" in out.err and "24" in out.out
    # and were reported while running, on the agent's loop
    streamed = {
        name: "".join(p.text for p in pieces if p.get("name") == name)
        for name in ("stdout", "stderr")
    }
    assert streamed == {"stdout": "total is 12\n", "stderr": "careful\n"}
    assert pieces[-1].output_type == "execute_result"


def test_rich_displays_updates_and_clear_output(executor: InProcessExecutor) -> None:
    code = (
        "from IPython.display import display, HTML, Image, clear_output\n"
        "h = display(HTML('<b>one</b>'), display_id=True)\n"
        "h.update(HTML('<b>two</b>'))\n"
        "display(Image(data=PNG))\n"
        "print('gone'); clear_output(wait=True); print('kept')\n"
    )
    executor.shell.user_ns["PNG"] = _png()
    (result,), _ = drive(executor, (code, None))
    assert result.status == "ok"
    kinds = [(o.output_type, sorted(o.get("data", {}))) for o in result.outputs]
    assert kinds == [("stream", [])], "clear_output(wait=True) clears at the next output"
    assert result.outputs[0].text == "kept\n"
    code2 = code.replace("print('gone'); clear_output(wait=True); print('kept')\n", "")
    (result,), _ = drive(executor, (code2, None))
    html, image = result.outputs
    assert html.data["text/html"] == "<b>two</b>", "update_display_data patched the first display"
    assert base64.b64decode(image.data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    nbformat.validate(_notebook_with(result.outputs))


def test_errors_and_syntax_errors(shell: InteractiveShell, executor: InProcessExecutor) -> None:
    (crash, syntax, after), _ = drive(
        executor,
        ("before_crash = 1\n1 / 0", None),
        ("def broken(:\n    pass", None),
        ("before_crash", None),
    )
    assert crash.status == "error" and crash.error is not None
    assert (crash.error.ename, crash.error.evalue) == ("ZeroDivisionError", "division by zero")
    assert crash.outputs[-1].output_type == "error" and crash.outputs[-1].traceback
    assert (
        syntax.status == "error"
        and syntax.error is not None
        and syntax.error.ename == "SyntaxError"
    )
    assert after.status == "ok" and after.outputs[0].data["text/plain"] == "1"


def test_timeout_interrupts_and_keeps_state(
    shell: InteractiveShell, executor: InProcessExecutor
) -> None:
    started = time.monotonic()
    (slow, spin, after), _ = drive(
        executor,
        ("kept = 'yes'\nimport time\ntime.sleep(30)\nkept = 'no'", 0.5),
        ("n = 0\nwhile True:\n    n += 1", 0.3),
        ("print(kept, n > 0)", 5),
    )
    elapsed = time.monotonic() - started
    assert slow.status == "timeout" and slow.error is not None
    assert slow.error.ename == "CellTimeoutError" and "0.5 s timeout" in slow.error.evalue
    assert spin.status == "timeout"
    assert after.status == "ok" and after.outputs[0].text == "yes True\n"
    assert elapsed < 10


def test_a_users_interrupt_stops_the_run(executor: InProcessExecutor) -> None:
    with pytest.raises(KeyboardInterrupt):
        executor.run_cell("raise KeyboardInterrupt")


def test_hooks_are_restored_after_each_cell(
    shell: InteractiveShell, executor: InProcessExecutor
) -> None:
    before = (sys.stdout.write, sys.stderr.write)
    drive(executor, ("print(1)\n1/0", None))
    assert "publish" not in vars(shell.display_pub)
    assert "write_format_data" not in vars(shell.displayhook)
    assert "_showtraceback" not in vars(shell)
    assert (sys.stdout.write, sys.stderr.write) == before
    assert shell.run_cell("print('plain')").success


def test_must_run_in_the_shells_thread(executor: InProcessExecutor) -> None:
    errors: list[BaseException] = []

    def other() -> None:
        try:
            executor.run_cell("print(1)")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], KernelError)
    assert "shell's own thread" in str(errors[0])


def test_restart_is_refused_and_lifecycle_is_a_no_op(executor: InProcessExecutor) -> None:
    loop = BackgroundLoop()
    try:
        with pytest.raises(KernelError, match="cannot restart"):
            loop.run(executor.restart())
        loop.run(executor.start())
        loop.run(executor.interrupt())  # nothing running: nothing happens
        assert loop.run(executor.is_alive())
        loop.run(executor.shutdown())
        with pytest.raises(ConfigError):
            loop.run(executor.execute("1", timeout=0))
    finally:
        loop.close()
    assert executor.run_cell("40 + 2").outputs[0].data["text/plain"] == "42"


def test_needs_a_shell() -> None:
    with pytest.raises(ConfigError):
        InProcessExecutor(None)


# ---------------------------------------------------------------- real ipykernel
_KERNEL_CELL = r"""
import json
from kernel_agent.executors.inprocess import InProcessExecutor
from kernel_agent.syncify import BackgroundLoop
from kernel_agent.kernel_state.namespace import NAMESPACE_EXPRESSION, parse_summary

ex = InProcessExecutor(get_ipython())
code = '''
import matplotlib.pyplot as plt
plt.plot(user_values, [v * v for v in user_values])
plt.title("squares")
squares = [v * v for v in user_values]
print("squares", squares)
'''
async def agen():
    yield await ex.execute(code, timeout=60, user_expressions={"ns": NAMESPACE_EXPRESSION})
    yield await ex.execute("import time; time.sleep(20)", timeout=0.5)
loop = BackgroundLoop()
results = list(loop.iterate(agen()))
loop.close()
summary = parse_summary(results[0].user_expressions["ns"])
report = {
    "status": [r.status for r in results],
    "kinds": [[o.output_type, sorted(o.get("data", {}))] for o in results[0].outputs],
    "ns": sorted(summary),
    "kernelspec": ex.kernelspec,
    "language": ex.language_info["name"],
}
"""


@pytest.mark.timeout(120)
def test_on_a_real_ipykernel_outputs_appear_inline_and_are_captured(tmp_path: Path) -> None:
    nb = new_notebook(
        cells=[
            new_code_cell("user_values = [1, 2, 3]"),
            new_code_cell(_KERNEL_CELL + "print(json.dumps(report))"),
            new_code_cell("print(squares, sorted(k for k in dir() if k == 'ex'))"),
        ]
    )
    execute(nb, tmp_path)
    outputs = nb.cells[1].outputs
    # inline, as for any cell: the printed line, the figure, the timeout's KeyboardInterrupt
    texts = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "squares [1, 4, 9]" in texts
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert any(o.output_type == "error" and o.ename == "KeyboardInterrupt" for o in outputs)
    report = json.loads(texts.strip().splitlines()[-1])
    assert report["status"] == ["ok", "timeout"]
    assert ["stream", []] in report["kinds"]
    assert ["display_data", ["image/png", "text/plain"]] in report["kinds"]
    assert {"user_values", "squares"} <= set(report["ns"])
    assert report["kernelspec"]["name"] == "python3" and report["language"] == "python"
    # the kernel lives on with the agent's variables
    assert nb.cells[2].outputs[0].text.startswith("[1, 4, 9]")


def _png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _notebook_with(outputs: list[Any]) -> Any:
    cell = new_code_cell("x", outputs=list(outputs), execution_count=1)
    return new_notebook(cells=[cell])
