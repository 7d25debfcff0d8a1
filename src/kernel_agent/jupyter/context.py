"""What the agent is told of the open notebook, and what its transcript keeps of it.

The model sees the notebook's cells (bounded) and the kernel's variables, as
``%%agent`` shows them (:func:`notebook_context`, :func:`with_context`). The local
transcript starts with the user's code cells as they were when the run began
(:func:`record_user_cells`), so its clean notebook re-runs from the top: ``verify``
checks the agent's cells on the state the user's cells made.

The notebook's cells are a stranger's data here (any kernel may have written their
outputs): only outputs of the four nbformat kinds with plain text values are kept,
each bounded; anything else is dropped and said so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbformat import NotebookNode

from ..kernel_state.namespace import VariableInfo, parse_summary, probe_namespace
from ..notebook import cellmeta as M

if TYPE_CHECKING:
    from ..notebook.transcript import Transcript
    from .executor import AsyncNotebookExecutor
    from .shared_doc import SharedNotebook

__all__ = ["notebook_context", "record_user_cells", "with_context", "USER_CELL"]

#: ``metadata.kernel_agent.source`` of a user's cell copied into the transcript
USER_CELL = "jupyter-user"
#: characters of one output value kept from the user's notebook
_VALUE_CHARS = 100_000
_STREAMS = ("stdout", "stderr")


async def notebook_context(
    executor: AsyncNotebookExecutor,
) -> tuple[str, dict[str, VariableInfo]]:
    """What the model is told of the open notebook: its cells, and the kernel's variables.

    Starts the executor if needed.
    """
    await executor.start()
    assert executor.doc is not None
    answer = await probe_namespace(executor)
    namespace = parse_summary(answer.get("ns")) if answer else None
    cells = executor.doc.describe()
    text = f"You are working in the notebook {executor.server.path!r}, open in JupyterLab."
    if cells:
        text += f" Its cells so far:\n\n{cells}"
    return text, namespace or {}


def with_context(task: str, context: str, namespace: Mapping[str, VariableInfo]) -> str:
    """The task, then what the notebook and its kernel hold."""
    shown = ", ".join(v.short() for v in list(namespace.values())[:30])
    more = f"\n\n(Variables already defined in the kernel: {shown}.)" if shown else ""
    return f"{task}\n\n({context})" + more


def code_cells(doc: SharedNotebook) -> list[dict[str, Any]]:
    """The notebook's code cells with a source (the user's, and an earlier run's)."""
    return [
        cell
        for cell in doc.cells()
        if cell.get("cell_type") == "code" and str(cell.get("source") or "").strip()
    ]


def record_user_cells(transcript: Transcript, doc: SharedNotebook) -> int:
    """Copy the notebook's code cells (source and plain outputs) to the transcript's top.

    Returns how many. Each is marked ``ok`` (so the clean notebook keeps it) and
    ``source: jupyter-user``: what the kernel ran before this run, as far as the
    notebook shows it.
    """
    cells = code_cells(doc)
    for cell in cells:
        node = transcript.add_code(
            str(cell["source"]), None, {M.STATUS: "ok", "source": USER_CELL}, save=False
        )
        outputs = cell.get("outputs")
        node.outputs = [o for o in map(_plain_output, outputs or []) if o is not None]
        count = cell.get("execution_count")
        node.execution_count = count if isinstance(count, int) and count >= 0 else None
    if cells:
        transcript.save()
    return len(cells)


def _text(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "".join(value)
    return value[:_VALUE_CHARS] if isinstance(value, str) else None


def _plain_output(output: Any) -> NotebookNode | None:
    """An nbformat output made only of what a user's output may hold; None if not one."""
    if not isinstance(output, dict):
        return None
    kind = output.get("output_type")
    if kind == "stream":
        text = _text(output.get("text"))
        name = output.get("name")
        if text is None or name not in _STREAMS:
            return None
        return NotebookNode(output_type="stream", name=name, text=text)
    if kind == "error":
        tb = output.get("traceback")
        lines = [t for t in map(_text, tb if isinstance(tb, list) else []) if t is not None]
        return NotebookNode(
            output_type="error",
            ename=_text(output.get("ename")) or "",
            evalue=_text(output.get("evalue")) or "",
            traceback=lines[:200],
        )
    if kind not in ("execute_result", "display_data"):
        return None
    data = output.get("data")
    if not isinstance(data, dict):
        return None
    kept = {
        str(mime)[:100]: text
        for mime, value in list(data.items())[:20]
        if "/" in str(mime) and (text := _text(value)) is not None
    }
    if not kept:
        return None
    node = NotebookNode(output_type=kind, data=kept, metadata={})
    if kind == "execute_result":
        count = output.get("execution_count")
        node.execution_count = count if isinstance(count, int) and count >= 0 else None
    return node
