"""Where a kernel's bytes and a stranger's notebooks are read: never with root's powers.

:func:`call` runs one task on a JSON request and returns its JSON answer:

- ``html``, ``markdown``, ``pdf``: nbconvert's conversions (:mod:`.convert`), for
  ``export``, ``serve``'s views and ``observe``;
- ``compare``: verify's comparison of stored and re-executed outputs (:mod:`.compare`,
  Pillow decoding both sides' images);
- ``images``: a cell's images made small for a model
  (:func:`~kernel_agent.edges.images.bound_image`).

**As root**, the task runs in a process of its own, ``python -m kernel_agent.notebook.worker
TASK``, as a leased unprivileged uid (:func:`kernel_agent.sandbox.unprivileged.run_module`):
the request goes in on stdin, the answer comes back on stdout, and the worker cannot read
a file that only root or the user may read. **As any other user** it runs in-process:
there is no power to drop, and the same rules of :mod:`.convert` hold.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ExportError, KernelAgentError, NotebookError, one_line

if TYPE_CHECKING:
    from ..edges.images import BoundedImage

__all__ = ["call", "main", "bound_images", "TASKS", "MAX_REQUEST"]

#: The largest request a worker reads (a notebook of the host's 100 MB bound, twice over).
MAX_REQUEST = 256 << 20
_MODULE = "kernel_agent.notebook.worker"


def _notebook(request: dict[str, Any]) -> Any:
    import nbformat

    return nbformat.from_dict(request["nb"])


def _html(request: dict[str, Any]) -> Any:
    from .convert import to_html

    return to_html(_notebook(request), request["dir"], request["name"])


def _markdown(request: dict[str, Any]) -> Any:
    from .convert import to_markdown

    body, outputs = to_markdown(
        _notebook(request), request["dir"], request["name"], request["files_dir"], request["key"]
    )
    return {"body": body, "outputs": {k: _b64(v) for k, v in outputs.items()}}


def _pdf(request: dict[str, Any]) -> Any:
    from .convert import to_pdf

    return _b64(to_pdf(_notebook(request), request["dir"], request["name"], request["engine"]))


def _compare(request: dict[str, Any]) -> Any:
    from .compare import ImageTolerance, compare_outputs

    tolerance = ImageTolerance(*request["tolerance"])
    out = []
    for stored, fresh in request["pairs"]:
        result = compare_outputs(stored, fresh, tolerance)
        out.append([result.same, result.problems, result.diff])
    return out


def _images(request: dict[str, Any]) -> Any:
    from ..edges.images import bound_image

    out: list[Any] = []
    for mime, data in request["images"]:
        bounded = bound_image(mime, data)
        out.append(
            None
            if bounded is None
            else [bounded.mime, bounded.data, bounded.width, bounded.height, bounded.scaled]
        )
    return out


TASKS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "html": _html,
    "markdown": _markdown,
    "pdf": _pdf,
    "compare": _compare,
    "images": _images,
}
_ERRORS: dict[str, type[KernelAgentError]] = {
    "html": ExportError,
    "markdown": ExportError,
    "pdf": ExportError,
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unprivileged() -> bool:
    """True when tasks run in a worker process of their own (we are root)."""
    return os.geteuid() == 0


def call(task: str, request: dict[str, Any], *, timeout: float = 300.0) -> Any:
    """Run ``task`` on ``request``: in a worker of a leased uid as root, else in-process.

    A failure is the task's error (:class:`ExportError` for conversions,
    :class:`NotebookError` otherwise), with one line saying why.
    """
    error = _ERRORS.get(task, NotebookError)
    if not unprivileged():
        return TASKS[task](request)
    from ..sandbox.unprivileged import run_module

    payload = json.dumps(request, allow_nan=True).encode("utf-8")
    if len(payload) > MAX_REQUEST:
        raise error(f"too large to {task}: {len(payload):,} bytes (bound {MAX_REQUEST:,})")
    from jupyter_core.paths import jupyter_path

    out = run_module(
        _MODULE,
        [task],
        payload,
        timeout=timeout,
        purpose=f"the unprivileged {task} worker",
        env={"JUPYTER_PATH": os.pathsep.join(jupyter_path())},  # nbconvert's templates
        ro_paths=(str(request["dir"]),) if request.get("dir") else (),
        error=error,
    )
    try:
        reply = json.loads(out)
    except ValueError:
        raise error(f"the unprivileged {task} worker answered something that is not JSON") from None
    if not isinstance(reply, dict) or ("ok" not in reply and "error" not in reply):
        raise error(f"the unprivileged {task} worker answered an unexpected shape")
    if "error" in reply:
        raise error(one_line(str(reply["error"]), 400))
    return reply["ok"]


def bound_images(images: list[tuple[str, str]]) -> list[BoundedImage]:
    """Each ``(mime, base64)`` image of a cell made small for a model (Pillow decodes a
    kernel's bytes: as root, in the worker); the ones that cannot be are left out."""
    from ..edges.images import BoundedImage

    if not images:
        return []
    try:
        answer = call("images", {"images": [list(i) for i in images]}, timeout=120)
    except KernelAgentError:
        return []
    return [BoundedImage(*one) for one in answer if one is not None]


def main(argv: list[str] | None = None) -> int:
    """The worker: ``TASK`` in argv, the request on stdin, ``{"ok": …}`` or ``{"error": …}`` out."""
    args = sys.argv[1:] if argv is None else argv
    # jsonschema's optional IRI format checker builds a grammar at import: 3 s of every
    # worker's start. The worker validates nothing (the parent did), so it goes without.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    if len(args) != 1 or args[0] not in TASKS:
        print(f"usage: python -m {_MODULE} {{{','.join(TASKS)}}}", file=sys.stderr)
        return 2
    data = sys.stdin.buffer.read(MAX_REQUEST + 1)
    try:
        if len(data) > MAX_REQUEST:
            raise NotebookError(f"request over {MAX_REQUEST:,} bytes")
        reply: dict[str, Any] = {"ok": TASKS[args[0]](json.loads(data))}
    except KernelAgentError as exc:
        reply = {"error": one_line(str(exc), 400)}
    except Exception as exc:  # noqa: BLE001 - whatever a stranger's bytes make a library raise
        reply = {"error": f"{type(exc).__name__}: {one_line(str(exc), 300)}"}
    sys.stdout.write(json.dumps(reply))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
