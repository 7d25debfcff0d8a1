"""``kernel-agent serve --gateway-url``: time to first execute from a warm pool of gateway
kernels, against a cold gateway session and raw kernel starts, in one run.

    python bench/bench_gateway_pool.py [--samples 6]

A Jupyter Kernel Gateway on 127.0.0.1 and a real ``kernel-agent serve`` subprocess in front
of it, driven through ``kernel_agent.client``. "First execute" is ``POST /v1/sessions``
then ``POST .../execute print(1)``, timed together; warm: ``--pool 2`` (refilled between
samples); cold: no pool. The floors, measured in the same run:

- raw gateway: ``POST /api/kernels``, one websocket and ``print(1)`` until its reply, by hand
  (the least a gateway client does; ``POST`` alone returns before the kernel answers);
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


def raw_gateway_first(url: str, token: str) -> float:
    """``POST /api/kernels``, one websocket, ``print(1)`` until its reply: the least a client
    of the gateway can do (legacy JSON framing, no checks)."""
    import uuid

    import websocket

    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    began = time.perf_counter()
    request = urllib.request.Request(
        f"{url}/api/kernels", data=b'{"name": "python3"}', headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        kernel = json.loads(reply.read())
    ws = websocket.create_connection(
        url.replace("http", "ws", 1) + f"/api/kernels/{kernel['id']}/channels",
        header=[f"Authorization: token {token}"],
        timeout=60,
    )
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "username": "", "session": uuid.uuid4().hex, "date": "",
              "msg_type": "execute_request", "version": "5.3"}  # fmt: skip
    content = {"code": "print(1)", "silent": False, "store_history": True,
               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}  # fmt: skip
    ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {},
                        "content": content, "channel": "shell", "buffers": []}))  # fmt: skip
    seen: set[str] = set()
    while not {"stream", "execute_reply"} <= seen:
        msg = json.loads(ws.recv())
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            seen.add(msg.get("msg_type") or msg["header"]["msg_type"])
    took = time.perf_counter() - began
    ws.close()
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


def wait_pool(ka: Client, size: int) -> None:
    deadline = time.monotonic() + 90
    while ka.http.get("/healthz").json()["pool_ready"] < size:
        if time.monotonic() > deadline:
            raise SystemExit("the gateway pool did not fill")
        time.sleep(0.05)


def first_execute(ka: Client) -> float:
    began = time.perf_counter()
    s = ka.create_session()
    cell = ka.execute(s.id, "print(1)")
    took = time.perf_counter() - began
    assert cell.stdout == "1\n"
    ka.delete_session(s.id)
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=6)
    n = parser.parse_args().samples
    token = secrets.token_hex(8)
    proc, url = start_gateway(token)
    gw_args = ("--gateway-url", url, "--gateway-token", token)
    rows: dict[str, list[float]] = {
        "serve, gateway pool (warm)": [],
        "serve, gateway cold": [],
        "floor: raw gateway": [],
        "floor: GatewaySession": [],
        "floor: raw jupyter_client": [],
    }
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            server(Path(tmp) / "warm", *gw_args, "--pool", "2") as (warm_url, _),
            server(Path(tmp) / "cold", *gw_args) as (cold_url, _),
            Client(warm_url, token=TOKEN, timeout=120) as warm,
            Client(cold_url, token=TOKEN, timeout=120) as cold,
        ):
            for _ in range(n):  # interleaved, so machine noise hits all alike
                wait_pool(warm, 2)  # no refill running while anything is timed
                rows["floor: raw gateway"].append(raw_gateway_first(url, token))
                rows["floor: GatewaySession"].append(gateway_session_first(url, token))
                rows["floor: raw jupyter_client"].append(raw_local_first())
                rows["serve, gateway cold"].append(first_execute(cold))
                rows["serve, gateway pool (warm)"].append(first_execute(warm))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    base_gw = statistics.median(rows["floor: raw gateway"])
    base_local = statistics.median(rows["floor: raw jupyter_client"])
    print(f"time to first execute, {n} samples each (median, min-max)")
    print(f"{'':34s} {'median':>9s} {'range':>17s} {'/ raw gw':>9s} {'/ raw jc':>9s}")
    for name, values in rows.items():
        med = statistics.median(values)
        span = f"{min(values) * 1e3:.0f}-{max(values) * 1e3:.0f} ms"
        print(f"{name:34s} {med * 1e3:6.0f} ms {span:>17s} {med / base_gw:8.2f}x "
              f"{med / base_local:8.2f}x")  # fmt: skip
    warm, cold = (statistics.median(rows[k]) for k in ("serve, gateway pool (warm)",
                                                       "serve, gateway cold"))  # fmt: skip
    print(f"the pool's first execute is {cold / warm:.0f}x faster than a cold gateway session's")


if __name__ == "__main__":
    main()
