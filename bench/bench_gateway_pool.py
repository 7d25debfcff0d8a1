"""``kernel-agent serve --gateway-url``: time to first execute from a warm pool of gateway
kernels, against a cold gateway session and raw kernel starts, in one run.

    python bench/bench_gateway_pool.py [--samples 6]

A Jupyter Kernel Gateway on 127.0.0.1 and a real ``kernel-agent serve`` subprocess in front
of it, driven through ``kernel_agent.client``. "First execute" is ``POST /v1/sessions``
then ``POST .../execute print(1)``, timed together; warm: ``--pool 2`` (refilled between
samples); cold: no pool. The floors, measured in the same run:

- raw gateway start: ``POST /api/kernels`` alone (the gateway's own kernel start);
- GatewaySession: our executor's start (REST, websocket, kernel_info, the private work
  dir) plus its first ``print(1)``;
- raw jupyter_client: ``start_new_kernel`` + ``execute_interactive('print(1)')`` on this host.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_gateway import start_gateway
from bench_serve import TOKEN, server
from jupyter_client.manager import start_new_kernel

from kernel_agent.client import Client
from kernel_agent.executors.gateway import GatewaySession


def raw_gateway_start(url: str, token: str) -> float:
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    began = time.perf_counter()
    request = urllib.request.Request(
        f"{url}/api/kernels", data=b'{"name": "python3"}', headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        kernel = json.loads(reply.read())
    took = time.perf_counter() - began
    delete = urllib.request.Request(
        f"{url}/api/kernels/{kernel['id']}", headers=headers, method="DELETE"
    )
    urllib.request.urlopen(delete, timeout=30).close()
    return took


def gateway_session_first(url: str, token: str) -> float:
    began = time.perf_counter()
    with GatewaySession(url, token, "python3") as gw:
        assert gw.execute("print(1)").outputs[0]["text"] == "1\n"
        took = time.perf_counter() - began
    return took


def raw_local_first() -> float:
    began = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        kc.execute_interactive("print(1)", output_hook=lambda m: None, timeout=60)
        return time.perf_counter() - began
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def first_execute(url: str, n: int, warm: bool) -> list[float]:
    times = []
    with Client(url, token=TOKEN, timeout=120) as ka:
        for _ in range(n):
            if warm:
                deadline = time.monotonic() + 90
                while ka.http.get("/healthz").json()["pool_ready"] < 2:
                    if time.monotonic() > deadline:
                        raise SystemExit("the gateway pool did not fill")
                    time.sleep(0.05)
            began = time.perf_counter()
            s = ka.create_session()
            cell = ka.execute(s.id, "print(1)")
            times.append(time.perf_counter() - began)
            assert cell.stdout == "1\n"
            ka.delete_session(s.id)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=6)
    n = parser.parse_args().samples
    token = secrets.token_hex(8)
    proc, url = start_gateway(token)
    gw_args = ("--gateway-url", url, "--gateway-token", token)
    try:
        floors: dict[str, list[float]] = {"raw gateway start": [], "GatewaySession": [],
                                          "raw jupyter_client": []}  # fmt: skip
        for _ in range(n):  # interleaved, so machine noise hits all alike
            floors["raw gateway start"].append(raw_gateway_start(url, token))
            floors["GatewaySession"].append(gateway_session_first(url, token))
            floors["raw jupyter_client"].append(raw_local_first())
        with tempfile.TemporaryDirectory() as tmp:
            with server(Path(tmp) / "warm", *gw_args, "--pool", "2") as (serve_url, _):
                warm = first_execute(serve_url, n, warm=True)
            with server(Path(tmp) / "cold", *gw_args) as (serve_url, _):
                cold = first_execute(serve_url, n, warm=False)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    rows = {
        "serve, gateway pool (warm)": warm,
        "serve, gateway cold": cold,
        **{f"floor: {k}": v for k, v in floors.items()},
    }
    base_gw = statistics.median(floors["raw gateway start"])
    base_local = statistics.median(floors["raw jupyter_client"])
    print(f"time to first execute, {n} samples each (median, min-max)")
    print(f"{'':34s} {'median':>9s} {'range':>17s} {'/ raw gw':>9s} {'/ raw jc':>9s}")
    for name, values in rows.items():
        med = statistics.median(values)
        span = f"{min(values) * 1e3:.0f}-{max(values) * 1e3:.0f} ms"
        print(f"{name:34s} {med * 1e3:6.0f} ms {span:>17s} {med / base_gw:8.2f}x "
              f"{med / base_local:8.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
