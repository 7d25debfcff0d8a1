"""The shared server runner's parts: caps from the file limit, the limit raised, the log
filter. (The servers themselves are attacked in tests/test_attacks_abuse.py.)"""

from __future__ import annotations

import argparse
import io
import logging
import subprocess
import sys

import pytest
from crossing import SRC as CHECKOUT_SRC  # noqa: E402

from kernel_agent.errors import ConfigError
from kernel_agent.frontends.httpd import (
    ConnectionTable,
    HttpLimits,
    QuietLogs,
    caps,
    limits_from_args,
)

SRC = str(CHECKOUT_SRC)  # this checkout's sources, for subprocesses of our uid


@pytest.mark.parametrize("fd_limit", [256, 1024, 4096, 20000, 65536])
def test_connections_and_one_accept_burst_stay_well_under_the_file_limit(fd_limit: int) -> None:
    for asked in (None, 10, 100_000):
        total, per_client, backlog = caps(fd_limit, HttpLimits(max_connections=asked))
        assert total + backlog <= fd_limit * 5 // 8  # the rest: kernels, files, logs
        assert 1 <= backlog < per_client <= total
        if asked == 10:
            assert total == 10


def test_the_soft_file_limit_is_raised_to_the_hard_one() -> None:
    code = "from kernel_agent.frontends.httpd import raise_fd_limit; print(raise_fd_limit())"
    out = subprocess.run(
        ["prlimit", "--nofile=256:4096", sys.executable, "-c", code],
        capture_output=True, text=True, env={"PYTHONPATH": SRC}, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "4096"


def test_bad_limits_are_one_line_errors() -> None:
    for timeout, most in ((0.0, None), (-1.0, None), (float("nan"), None), (5.0, 1)):
        with pytest.raises(ConfigError):
            limits_from_args(argparse.Namespace(client_timeout=timeout, max_connections=most))


class _Conn:
    def __init__(self) -> None:
        self.closed = False

    def close_idle(self) -> None:
        self.closed = True


def test_the_table_evicts_the_oldest_idle_connection_never_a_busy_one() -> None:
    table = ConnectionTable(total=3, per_client=2)
    a, b, c, d, e = (_Conn() for _ in range(5))
    assert table.admit(a, "x") and table.admit(b, "y")
    table.busy(a)
    assert table.admit(c, "x")  # x holds 2 now; y's b is idle
    assert table.admit(d, "z") and b.closed and not a.closed  # full: the oldest idle goes
    table.busy(c)
    table.busy(d)
    assert not table.admit(e, "w")  # every one busy: the newcomer is refused
    table.idle(c)
    assert table.admit(e, "x") and c.closed and not a.closed  # x's own idle one made room


def _logger(filt: QuietLogs) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(filt)
    logger = logging.getLogger(f"test-quiet-{id(filt)}")
    logger.propagate = False
    logger.handlers = [handler]
    return logger, out


def test_a_flood_of_log_records_becomes_a_few_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernel_agent.frontends.httpd as httpd

    clock = [0.0]
    monkeypatch.setattr(httpd.time, "monotonic", lambda: clock[0])
    logger, out = _logger(QuietLogs(burst=5, window=10.0))
    try:
        raise OSError(24, "Too many open files")
    except OSError as exc:
        accept_error = exc
    for _ in range(10_000):  # asyncio's accept loop at EMFILE, as it logged it
        logger.error(
            "socket.accept() out of system resource\nsocket: <socket fd=6>",
            exc_info=accept_error,
        )
    for i in range(10_000):  # uvicorn's per-request traceback, with varying args
        try:
            raise ConnectionError(f"client {i} went away")
        except ConnectionError:
            logger.exception("Exception in ASGI application\n")
    clock[0] = 11.0
    logger.error("socket.accept() out of system resource\nsocket: <socket fd=6>")
    lines = out.getvalue().splitlines()
    assert len(lines) == 11
    assert all("Traceback" not in line for line in lines)
    assert "OSError: [Errno 24] Too many open files" in lines[0]
    assert "ConnectionError: client 0 went away" in lines[5]
    assert lines[-1].endswith("(9995 more like this in the 10 s before)")


def test_debug_keeps_tracebacks() -> None:
    logger, out = _logger(QuietLogs(tracebacks=True))
    try:
        raise ValueError("kept")
    except ValueError:
        logger.exception("boom")
    assert "Traceback" in out.getvalue()
