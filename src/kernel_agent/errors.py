"""The exceptions (and the one warning) kernel-agent raises: every class lives here.

    KernelAgentError               base: every error the CLI turns into one line
    ├── ConfigError                bad settings or arguments (empty task, timeout <= 0, bad path)
    ├── UnsafePath                 a path that escapes its directory or goes through a symlink
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
    │       ├── ToolsRejected      the endpoint refused the request's tools (use fenced code)
    │       ├── ContextLengthExceeded  the conversation no longer fits the context window
    │       └── EmptyReply         a stream with no choice in it (retried)
    ├── LocalModelError            the bundled model is missing, corrupt or cannot be served
    ├── GatewayError               a Kernel/Enterprise Gateway refused or went away
    │   ├── AuthRefused            401/403: a missing or wrong gateway token
    │   ├── Unreachable            no answer (refused, reset, timed out, unknown host)
    │   ├── GatewayStatus          another HTTP error status (its caller adds what it did)
    │   ├── SendFailed             a message could not be sent on the kernel's websocket
    │   └── JupyterError           a notebook on a Jupyter server cannot be had, or went away
    ├── ToolError                  a host tool, set_result or install_package refused or failed
    │   └── InstallError           a package install was refused by the policy or failed
    ├── NotebookError              a notebook cannot be read, written or is invalid
    │   └── ExportError            a notebook cannot be exported (e.g. no PDF toolchain)
    │       └── BrowserSandboxUnavailable  Chromium's own sandbox does not start here
    ├── ImageTooLarge              an image with more pixels than the host decodes (a ValueError)
    ├── VerifyMismatch             re-execution did not reproduce the stored outputs
    ├── ServiceError               ``kernel-agent serve`` refuses a request (``status``: HTTP)
    │   ├── NotFound               404: no such session, run or file
    │   ├── Ended                  409: the session has ended
    │   ├── Deleted                410: the session was deleted meanwhile
    │   ├── TooLarge               413: over a size bound
    │   ├── TooBusy                429: over a limit (``retry_after``)
    │   └── Stopping               503: the server is shutting down
    ├── ServiceRefused             the HTTP client's view: the server answered an error status
    ├── MagicError                 ``%agent`` failed: IPython shows one line, not a traceback
    └── HelpShown                  ``%agent --help`` printed its help: nothing more to do

    UserWarning
    └── UnsandboxedKernelWarning   a kernel runs without the sandbox (bwrap was not available)

    KeyboardInterrupt
    └── Terminated                 SIGTERM in the CLI, handled like Ctrl-C (not an error)

Each carries a one-line message (:func:`one_line` makes one from any text);
``exit_code`` is what the CLI exits with. The only exceptions defined elsewhere are
the kernel-side helpers' (``tools/kernel_side.py``): that code runs inside the kernel.
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
    "UnsafePath",
    "ToolsRejected",
    "ContextLengthExceeded",
    "EmptyReply",
    "AuthRefused",
    "Unreachable",
    "GatewayStatus",
    "SendFailed",
    "JupyterError",
    "BrowserSandboxUnavailable",
    "ImageTooLarge",
    "ServiceError",
    "NotFound",
    "Ended",
    "Deleted",
    "TooLarge",
    "TooBusy",
    "Stopping",
    "ServiceRefused",
    "MagicError",
    "HelpShown",
    "UnsandboxedKernelWarning",
    "Terminated",
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


class JupyterError(GatewayError):
    """A notebook on a Jupyter server (``--jupyter-url``): not there, no collaboration, or gone."""


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


class UnsafePath(KernelAgentError):
    """A path that escapes its directory, or goes through a symlink."""

    exit_code = 2


class ToolsRejected(LLMResponseError):
    """The endpoint refused a request because of its ``tools``: use the fenced protocol."""


class ContextLengthExceeded(LLMResponseError):
    """The conversation no longer fits the model's context window."""


class EmptyReply(LLMResponseError):
    """A streamed reply that carried no choice (the LLM client retries it)."""


class AuthRefused(GatewayError):
    """The gateway answered 401/403: a missing or wrong token, or a user it refuses."""


class Unreachable(GatewayError):
    """No answer from the gateway (refused, reset, timed out, unknown host)."""


class GatewayStatus(GatewayError):
    """A non-auth HTTP error status; callers turn it into a GatewayError with context."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SendFailed(GatewayError):
    """A message could not be sent on the kernel's websocket (closed, or the send failed)."""


class BrowserSandboxUnavailable(ExportError):
    """Chromium's own sandbox does not start on this host (it renders without it)."""


class ImageTooLarge(KernelAgentError, ValueError):
    """An image with more pixels than the host will decode (a ValueError too, as every
    other image that cannot be read)."""


class ServiceError(KernelAgentError):
    """``kernel-agent serve`` refuses or fails a request; ``status`` is its HTTP code."""

    status = 500


class NotFound(ServiceError):
    status = 404


class Ended(ServiceError):
    status = 409


class Deleted(ServiceError):
    status = 410


class Stopping(ServiceError):
    status = 503


class TooLarge(ServiceError):
    status = 413


class TooBusy(ServiceError):
    """Over a limit; ``retry_after`` (seconds) goes into the ``Retry-After`` header."""

    status = 429

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServiceRefused(KernelAgentError):
    """The server answered a client's request with an error status (``status``,
    ``message``, and ``retry_after`` seconds for 429)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


class MagicError(KernelAgentError):
    """A one-line error in the cell (IPython shows ``_render_traceback_``, not a traceback)."""

    def _render_traceback_(self) -> list[str]:
        return [f"kernel-agent: error: {self}"]


class HelpShown(KernelAgentError):
    """argparse printed its help (``%agent --help``) and asked to exit: nothing more to do."""

    exit_code = 0


class UnsandboxedKernelWarning(UserWarning):
    """A kernel runs without the sandbox: its code can do what the agent's user can."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: the run stops cleanly, the notebook is kept."""


def one_line(text: object, limit: int = 200) -> str:
    """``text`` as one line for a message: ANSI escapes gone, whitespace runs (newlines
    included) made single spaces, cut to ``limit`` characters ending in "..."."""
    flat = " ".join(strip_ansi(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
