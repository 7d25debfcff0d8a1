"""Behaviour every kernel executor shares, written once and run against each backend.

A test module reuses it by subclassing :class:`ExecutorContract` and providing two
fixtures (the class name must start with ``Test`` for pytest to collect it)::

    from executor_contract import ExecutorContract

    class TestLocalKernelContract(ExecutorContract):
        death_bound = 3.0            # seconds within which a dead kernel is reported

        @pytest.fixture
        def executor(self, shared_kernel):   # a started sync executor, may be shared
            return shared_kernel

        @pytest.fixture
        def fresh_executor(self, tmp_path):  # factory: a new started executor per call
            made = []
            def make(**kw):
                ex = KernelSession("python3", cwd=tmp_path, **kw)
                ex.start()
                made.append(ex)
                return ex
            yield make
            for ex in made:
                ex.shutdown()

``fresh_executor`` must accept ``interrupt_grace=``. Tests on the shared executor
use names of their own, so they can run in any order.

:class:`ExecutorContract` is what every executor does, the in-process one included;
:class:`KernelContract` adds what a kernel in a process of its own does (timeouts that
restart it, restarts, death). A kernel backend subclasses :class:`KernelContract`.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
import zlib
from typing import Any

from fuzz_messages import CASES, kernel_code

from kernel_agent.executors.base import AsyncExecutor, Isolation
from kernel_agent.notebook.bounds import json_size
from kernel_agent.sandbox import KernelLauncher

__all__ = ["ExecutorContract", "KernelContract", "tiny_png"]

#: one fuzz case of each message type (tests/test_attacks_budget.py sends them all)
_FLOODS = (
    "stream.text_escapes",
    "display_data.metadata",
    "execute_result.execution_count",
    "error.traceback_lines",
    "update_display_data.data_and_metadata",
    "many.updates",
    "comm_msg.data",
    "status.execution_state",
)


def tiny_png() -> bytes:
    """A valid 1x1 PNG, built here so no file is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _stdout(result: Any) -> str:
    return "".join(
        o.text for o in result.outputs if o.output_type == "stream" and o.name == "stdout"
    )


class ExecutorContract:
    """Shared behaviour tests; subclasses provide ``executor`` and ``fresh_executor``."""

    #: seconds within which a kernel killed mid-cell must be reported "died"
    death_bound: float = 3.0

    # ------------------------------------------------------------ metadata
    def test_kernelspec_and_language_info(self, executor: Any) -> None:
        assert executor.kernelspec["name"]
        assert executor.kernelspec["language"] == "python"
        assert executor.kernelspec["display_name"]
        assert executor.language_info["name"] == "python"

    def test_declares_the_whole_executor_interface(self, executor: Any) -> None:
        assert isinstance(executor.aio, AsyncExecutor)
        isolation = executor.isolation
        assert isinstance(isolation, Isolation)
        assert isolation.mode in ("bwrap", "none", "remote", "unknown") and isolation.note
        metadata = isolation.to_metadata()
        assert (metadata["mode"], metadata["note"]) == (isolation.mode, isolation.note)
        json.dumps(metadata)  # goes into the notebook as it is
        launcher = executor.make_launcher()
        assert launcher is None or isinstance(launcher, KernelLauncher)

    def test_kernel_cwd_is_where_the_code_runs(self, executor: Any) -> None:
        result = executor.execute("import os as _contract_os\nprint(_contract_os.getcwd())")
        where = _stdout(result).strip()
        if executor.kernel_cwd is None:  # a kernel on another machine
            assert executor.cwd is None and where
        else:
            assert os.path.realpath(where) == os.path.realpath(executor.kernel_cwd)
            assert executor.cwd is not None

    # ------------------------------------------------------------ state and results
    def test_state_persists_across_cells(self, executor: Any) -> None:
        first = executor.execute("contract_state = 41")
        second = executor.execute("contract_state + 1")
        assert first.status == second.status == "ok"
        assert second.outputs[-1].output_type == "execute_result"
        assert second.outputs[-1].data["text/plain"] == "42"
        assert second.execution_count == first.execution_count + 1

    def test_user_expressions_come_back_with_the_reply(self, executor: Any) -> None:
        result = executor.execute("contract_y = 3", user_expressions={"double": "contract_y * 2"})
        assert result.ok
        assert result.user_expressions["double"]["data"]["text/plain"] == "6"

    def test_rich_outputs_are_full_mime_bundles(self, executor: Any) -> None:
        png = tiny_png()
        code = (
            "from IPython.display import display, HTML, Latex, JSON, Image\n"
            "display(HTML('<b>bold</b>'))\n"
            "display(Latex(r'$x^2$'))\n"
            "display(JSON({'a': [1, 2]}))\n"
            f"display(Image(data={png!r}, format='png'))\n"
        )
        result = executor.execute(code)
        assert result.ok, result.error
        bundles = [o.data for o in result.outputs if o.output_type == "display_data"]
        assert len(bundles) == 4
        assert bundles[0]["text/html"] == "<b>bold</b>"
        assert bundles[1]["text/latex"] == "$x^2$"
        assert bundles[2]["application/json"] == {"a": [1, 2]}
        assert base64.b64decode(bundles[3]["image/png"]) == png

    def test_update_display_patches_the_earlier_output(self, executor: Any) -> None:
        code = (
            "from IPython.display import display, HTML\n"
            "handle = display(HTML('first'), display_id=True)\n"
            "handle.update(HTML('second'))\n"
        )
        result = executor.execute(code)
        shown = [o for o in result.outputs if o.output_type == "display_data"]
        assert len(shown) == 1
        assert shown[0].data["text/html"] == "second"

    # ------------------------------------------------------------ streams
    def test_stream_chunks_are_coalesced(self, executor: Any) -> None:
        code = "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.02)\n"
        result = executor.execute(code)
        streams = [o for o in result.outputs if o.output_type == "stream"]
        assert len(streams) == 1
        assert streams[0].text == "0\n1\n2\n3\n4\n"

    def test_carriage_return_keeps_only_the_last_progress_state(self, executor: Any) -> None:
        result = executor.execute("print('10%', end='\\r'); print('100%')")
        assert _stdout(result) == "100%\n"

    def test_on_output_sees_outputs_as_they_arrive(self, executor: Any) -> None:
        seen: list[Any] = []
        result = executor.execute("print('a', flush=True)\n1 + 1", on_output=seen.append)
        kinds = [o.output_type for o in seen]  # a stream may come in several pieces
        assert kinds[-1] == "execute_result" and set(kinds[:-1]) == {"stream"}
        assert "".join(o.text for o in seen[:-1]) == "a\n"
        assert result.outputs[-1].data["text/plain"] == "2"

    def test_large_output_arrives_whole(self, executor: Any) -> None:
        result = executor.execute("print('x' * 500_000)")
        assert result.ok
        assert _stdout(result) == "x" * 500_000 + "\n"

    # ------------------------------------------------------------ errors
    def test_error_is_reported_and_the_next_cell_runs(self, executor: Any) -> None:
        result = executor.execute("print('before')\n1 / 0")
        assert result.status == "error"
        assert result.error.ename == "ZeroDivisionError"
        assert "1 / 0" in result.error.plain_traceback
        assert _stdout(result) == "before\n"
        assert result.outputs[-1].output_type == "error"
        assert executor.execute("'fine'").ok


class KernelContract(ExecutorContract):
    """What a kernel in a process of its own does besides: timeouts, restarts, death."""

    # ------------------------------------------------------------ timeout, interrupt, death
    def test_timeout_interrupts_and_keeps_state(self, fresh_executor: Any) -> None:
        ex = fresh_executor(interrupt_grace=3.0)
        ex.execute("kept = 'yes'")
        started = time.monotonic()
        result = ex.execute("import time\nwhile True:\n    time.sleep(0.01)", timeout=1.0)
        assert result.status == "timeout"
        assert not result.restarted
        assert result.error.ename == "CellTimeoutError"
        assert time.monotonic() - started < 1.0 + 3.0
        assert ex.execute("kept").outputs[-1].data["text/plain"] == "'yes'"

    def test_timeout_that_ignores_interrupts_restarts_the_kernel(self, fresh_executor: Any) -> None:
        ex = fresh_executor(interrupt_grace=1.0)
        ex.execute("lost = 1")
        code = (
            "import signal, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "while True:\n    time.sleep(0.01)\n"
        )
        result = ex.execute(code, timeout=1.0)
        assert result.status == "timeout"
        assert result.restarted
        after = ex.execute("'lost' in dir()")
        assert after.ok and after.outputs[-1].data["text/plain"] == "False"

    def test_restart_loses_state_and_keeps_working(self, fresh_executor: Any) -> None:
        ex = fresh_executor()
        ex.execute("gone = 1")
        ex.restart()
        result = ex.execute("'gone' in dir()")
        assert result.outputs[-1].data["text/plain"] == "False"
        assert ex.is_alive()

    def test_death_is_reported_quickly_and_the_next_cell_runs(self, fresh_executor: Any) -> None:
        ex = fresh_executor()
        started = time.monotonic()
        result = ex.execute("import os\nos._exit(1)")
        elapsed = time.monotonic() - started
        assert result.status == "died"
        assert result.error.ename == "DeadKernelError"
        assert result.restarted
        assert elapsed < self.death_bound, f"death took {elapsed:.1f} s to notice"
        after = ex.execute("print('alive')")
        assert after.ok and _stdout(after) == "alive\n"

    # ------------------------------------------------------------ what the host keeps
    def test_a_flooded_field_keeps_the_cell_within_its_budget(self, fresh_executor: Any) -> None:
        # the kernel sends raw messages through its own session: every path to the host
        # (zmq, a gateway's websocket) ends in the same collector and run budget
        ex = fresh_executor()
        for case in (c for c in CASES if c.name in _FLOODS):
            result = ex.execute(kernel_code(case, 4_000_000), timeout=60)
            kept = json_size(list(result.outputs))
            assert kept <= 8_000_000 + 16_384, f"{case.name}: {kept:,} characters kept"
            assert result.execution_count is None or result.execution_count < 2**31
            assert ex.execute("print('alive')").outputs[0].text == "alive\n", case.name
