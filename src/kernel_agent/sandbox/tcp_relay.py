"""A byte relay for kernels that speak only TCP (Deno's), behind an ipc connection.

Every kernel-agent kernel gets an ipc connection file: unix sockets in its private
connection dir, which work across the sandbox's empty network namespace (a TCP port
inside it is unreachable from the host). Deno's kernel binds TCP only, so the launcher
runs it under this relay, inside the sandbox: the relay listens on the five unix
sockets the client expects and forwards each connection, byte for byte (ZMTP is the
same over both transports), to the kernel's TCP ports on the sandbox's own loopback.

This file runs as a script with ``python -I -S`` (standard library only); the
launcher copies it into the kernel's connection dir. ``SIGINT`` is passed on to the
kernel, and the relay exits with the kernel's status.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["needs_relay", "relay_argv", "SOURCE"]

#: kernel programs that bind TCP only
_TCP_ONLY = {"deno"}
_CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")

SOURCE = Path(__file__).read_text(encoding="utf-8") if "__file__" in globals() else ""


def needs_relay(argv: list[str]) -> bool:
    return bool(argv) and Path(argv[0]).name in _TCP_ONLY


def relay_argv(python: str, script: Path, connection_file: str, argv: list[str]) -> list[str]:
    """``python -I -S script CONN -- argv`` (the kernel's argv naming the ipc file)."""
    return [python, "-I", "-S", str(script), connection_file, "--", *argv]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def _forwarder(port: int):  # noqa: ANN202
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(600):  # the kernel may still be binding: up to ~30 s
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        else:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return forward


async def _main(conn_file: str, argv: list[str]) -> int:
    info = json.loads(Path(conn_file).read_text())
    tcp = dict(info, transport="tcp", ip="127.0.0.1")
    for name in _CHANNELS:
        tcp[name] = _free_port()
    scratch = Path(tempfile.mkdtemp(prefix="relay-"))
    tcp_file = scratch / "kernel-tcp.json"
    tcp_file.write_text(json.dumps(tcp))
    tcp_file.chmod(0o600)
    servers = []
    for name in _CHANNELS:
        path = f"{info['ip']}-{info[name]}"
        if os.path.exists(path):
            os.unlink(path)
        servers.append(await asyncio.start_unix_server(_forwarder(tcp[name]), path=path))
    kernel = subprocess.Popen([tcp_file.as_posix() if a == conn_file else a for a in argv])
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, lambda: kernel.send_signal(signal.SIGINT))
    loop.add_signal_handler(signal.SIGTERM, lambda: kernel.send_signal(signal.SIGTERM))
    code = await loop.run_in_executor(None, kernel.wait)
    for server in servers:
        server.close()
    return code


if __name__ == "__main__":
    conn, _, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.exit(asyncio.run(_main(conn, rest)))
