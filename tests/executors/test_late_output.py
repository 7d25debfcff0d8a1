"""Output a kernel publishes after its idle still belongs to its cell (executors.late_output).

Deno's kernel reads a cell's stdout from a pipe in a task of its own, so lines of a
cell can come after its ``idle`` (CI lost one that way). A timer that prints 50 ms
after the cell ends makes that late output certain, on a real Deno kernel, locally and
through a real Kernel Gateway.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from gateway_server import KernelGateway

from kernel_agent.executors.gateway import GatewaySession
from kernel_agent.executors.kernel import KernelSession
from kernel_agent.executors.late_output import MAX_S, QUIET_S, LateOutput, window_for

pytestmark = pytest.mark.timeout(120)

LATE = "console.log('now'); setTimeout(() => console.log('late'), 50);"
TICKS = "globalThis.ticker = setInterval(() => console.log('tick'), 20);"


def _deno() -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    if "deno" not in KernelSpecManager().find_kernel_specs():
        import os

        message = "no 'deno' kernelspec: run `make deno-kernel`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _lines(result: Any) -> list[str]:
    text = "".join(o.text for o in result.outputs if o.output_type == "stream")
    return text.splitlines()


def test_the_window_is_for_kernels_that_do_not_flush_before_idle() -> None:
    assert window_for({"implementation": "ipython"}) == 0.0
    assert window_for({"implementation": "Deno kernel"}) == QUIET_S
    assert window_for({}) == QUIET_S  # a kernel that says nothing promises nothing


def test_the_window_stays_open_while_output_comes_and_no_longer_than_its_bound() -> None:
    late = LateOutput(0.1).open(10.0)
    assert late.closes_at() == pytest.approx(10.1)
    late.heard(10.08)
    assert late.closes_at() == pytest.approx(10.18)
    late.heard(10.0 + MAX_S - 0.01)
    assert late.closes_at() == pytest.approx(10.0 + MAX_S)
    assert LateOutput(0.0).open(5.0).closes_at() == 5.0  # ipykernel: the cell ends at once


def _check(session: Any) -> None:
    result = session.execute(LATE)
    assert result.ok, result.error
    assert _lines(result) == ["now", "late"]
    started = time.monotonic()
    ticking = session.execute(TICKS)
    took = time.monotonic() - started
    session.execute("clearInterval(globalThis.ticker);")
    assert ticking.ok and took < MAX_S + 2.0, took  # a printing timer cannot hold it open
    assert "tick" in _lines(ticking)


def test_a_local_deno_cell_keeps_the_lines_printed_after_its_idle(tmp_path: Path) -> None:
    _deno()
    with KernelSession("deno", cwd=tmp_path) as session:
        assert session.aio.late_output_s == QUIET_S
        _check(session)


def test_ipykernel_cells_end_at_their_idle(kernel: Any) -> None:
    assert kernel.aio.late_output_s == 0.0


def test_a_gateway_deno_cell_keeps_the_lines_printed_after_its_idle(tmp_path: Path) -> None:
    _deno()
    gateway = KernelGateway(tmp_path, "t0ken").start()
    try:
        with GatewaySession(gateway.url, gateway.token, "deno") as session:
            assert session.aio.late_output_s == QUIET_S
            _check(session)
    finally:
        gateway.stop()
