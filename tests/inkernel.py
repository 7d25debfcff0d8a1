"""Run notebooks on a real ipykernel that imports this checkout's ``kernel_agent``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from crossing import SRC
from nbclient import NotebookClient


def kernel_env() -> dict[str, str]:
    """Our environment with this checkout's sources first on the kernel's path.

    The venv has the package installed (editable) from another checkout; the
    kernel subprocess must import the code under test.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env.pop("MPLBACKEND", None)  # ipykernel's default: the inline backend
    return env


def execute(nb: Any, cwd: Path, *, allow_errors: bool = False, timeout: int = 90) -> Any:
    """Execute ``nb`` in place with nbclient in ``cwd``; returns it."""
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env=kernel_env())
    return nb
