"""The ``--jupyter-url`` flags that ``run``, ``mcp`` and ``acp`` share, and what they build.

``--jupyter-url URL --notebook PATH``: the notebook PATH (as the server names it) on
the Jupyter server at URL. The server's token comes from the environment only
(``JUPYTER_TOKEN``, or the variable ``--jupyter-token-env`` names), never from argv,
where other users of the machine could read it.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .server import TOKEN_ENV, JupyterServer, check_notebook_path

if TYPE_CHECKING:
    from ..settings import Settings
    from .executor import AsyncNotebookExecutor

__all__ = ["JupyterTarget", "add_jupyter_options", "jupyter_target", "warning_line"]


@dataclass(frozen=True)
class JupyterTarget:
    """A notebook on a running Jupyter server, and the token to reach it."""

    url: str
    path: str
    token: str | None

    def server(self) -> JupyterServer:
        return JupyterServer(self.url, self.token, self.path)

    def executor(self, settings: Settings) -> AsyncNotebookExecutor:
        from .executor import AsyncNotebookExecutor

        return AsyncNotebookExecutor(
            self.server(),
            kernel_name=settings.kernel_name if settings.kernel_name != "python3" else None,
            startup_timeout=settings.startup_timeout,
            max_output_chars=settings.max_output_chars,
        )


def add_jupyter_options(parser: argparse.ArgumentParser) -> None:
    """``--jupyter-url`` and ``--jupyter-token-env`` (``--notebook`` is the command's own)."""
    g = parser.add_argument_group(
        "a notebook open in JupyterLab",
        "work in the notebook --notebook PATH on a running Jupyter server, in its own kernel "
        "(unsandboxed): each cell appears in the open notebook as it runs",
    )
    g.add_argument("--jupyter-url", metavar="URL", help="the Jupyter server, http://host:port")
    g.add_argument(
        "--jupyter-token-env",
        metavar="NAME",
        default=TOKEN_ENV,
        help=f"the environment variable holding the server's token (default {TOKEN_ENV})",
    )


def jupyter_target(
    args: argparse.Namespace, notebook: Any, *, per_prompt: bool = False
) -> JupyterTarget | None:
    """The target the flags name, or None without ``--jupyter-url``. ``per_prompt``: no
    ``--notebook`` is fine (``acp``: each session's first prompt names it; path "")."""
    url = getattr(args, "jupyter_url", None)
    if not url:
        return None
    if getattr(args, "gateway_url", None):
        raise ConfigError("--jupyter-url and --gateway-url pick two different kernels: give one")
    name = args.jupyter_token_env or TOKEN_ENV
    token = os.environ.get(name) or None
    if notebook is None and per_prompt:
        return JupyterTarget(str(url), "", token)
    if notebook is None:
        raise ConfigError(
            "--jupyter-url needs --notebook PATH: the notebook as the server names it"
        )
    path = check_notebook_path(
        str(notebook) if not isinstance(notebook, Path) else notebook.as_posix()
    )
    return JupyterTarget(str(url), path, token)


def warning_line(url: str) -> str:
    """The first line the CLI prints when it attaches."""
    from .executor import UNSANDBOXED

    return "kernel-agent: WARNING: " + UNSANDBOXED.format(url=url)
