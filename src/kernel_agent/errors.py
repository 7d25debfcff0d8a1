"""The exceptions kernel-agent raises.

    KernelAgentError               base: every error the CLI turns into one line
    ├── ConfigError                bad settings or arguments (empty task, timeout <= 0, bad path)
    ├── KernelError                anything about starting or driving a kernel
    │   ├── KernelNotFound         no kernelspec by that name
    │   ├── KernelStartError       the kernel did not start or did not answer
    │   └── KernelDied             the kernel is gone and could not be brought back
    ├── SandboxError               the sandbox was asked for and cannot be had
    ├── LLMError                   talking to the model failed
    │   ├── LLMConnectionError     endpoint unreachable (after retries)
    │   ├── LLMAuthError           401/403: a missing or wrong key
    │   ├── LLMModelNotFound       the endpoint does not know the model
    │   └── LLMResponseError       a reply we could not use
    ├── LocalModelError            the bundled model is missing, corrupt or cannot be served
    ├── GatewayError               a Kernel/Enterprise Gateway refused or went away
    ├── ToolError                  a host tool, set_result or install_package refused or failed
    │   └── InstallError           a package install was refused by the policy or failed
    ├── NotebookError              a notebook cannot be read, written or is invalid
    │   └── ExportError            a notebook cannot be exported (e.g. no PDF toolchain)
    └── VerifyMismatch             re-execution did not reproduce the stored outputs

Each carries a one-line message (:func:`one_line` makes one from any text);
``exit_code`` is what the CLI exits with.
"""

from __future__ import annotations

from .results import strip_ansi

__all__ = [
    "one_line",
    "KernelAgentError",
    "ConfigError",
    "KernelError",
    "KernelNotFound",
    "KernelStartError",
    "KernelDied",
    "SandboxError",
    "LLMError",
    "LLMConnectionError",
    "LLMAuthError",
    "LLMModelNotFound",
    "LLMResponseError",
    "LocalModelError",
    "GatewayError",
    "ToolError",
    "InstallError",
    "NotebookError",
    "ExportError",
    "VerifyMismatch",
]


class KernelAgentError(Exception):
    """Base class. ``str(err)`` is a complete one-line message for a user."""

    exit_code = 1


class ConfigError(KernelAgentError):
    exit_code = 2


class KernelError(KernelAgentError):
    exit_code = 3


class KernelNotFound(KernelError):
    pass


class KernelStartError(KernelError):
    pass


class KernelDied(KernelError):
    pass


class SandboxError(KernelAgentError):
    exit_code = 3


class LLMError(KernelAgentError):
    exit_code = 4


class LLMConnectionError(LLMError):
    pass


class LLMAuthError(LLMError):
    pass


class LLMModelNotFound(LLMError):
    pass


class LLMResponseError(LLMError):
    pass


class LocalModelError(KernelAgentError):
    exit_code = 5


class GatewayError(KernelAgentError):
    exit_code = 3


class ToolError(KernelAgentError):
    """Its message reaches the kernel's code as the exception a helper raises there."""

    exit_code = 8


class InstallError(ToolError):
    pass


class NotebookError(KernelAgentError):
    exit_code = 6


class ExportError(NotebookError):
    pass


class VerifyMismatch(KernelAgentError):
    exit_code = 7


def one_line(text: object, limit: int = 200) -> str:
    """``text`` as one line for a message: ANSI escapes gone, whitespace runs (newlines
    included) made single spaces, cut to ``limit`` characters ending in "..."."""
    flat = " ".join(strip_ansi(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
