"""Wheels built in a test, for ``install_package`` and its attacks: never the network."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

__all__ = ["build_wheel"]


def build_wheel(where: Path, name: str, version: str, body: str) -> Path:
    """A minimal pure-Python wheel holding module ``name`` with ``body``."""
    files = {
        f"{name}/__init__.py": body,
        f"{name}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ),
        f"{name}-{version}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(content.encode())}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    wheel = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, content in files.items():
            zf.writestr(path, content)
    return wheel


#: a cell that asks for each of ``names`` (``.format(names=[...])``) and prints refusals
TRY = (
    "for name in {names!r}:\n"
    "    try:\n"
    "        install_package(name)\n"
    "    except ToolError as e:\n"
    "        print('refused:', e)\n"
)
