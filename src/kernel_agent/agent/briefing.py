"""What the model is told before it writes a cell: the kernel's libraries and its data files.

Both are asked of the kernel itself (the preview by the ``data_preview`` lever,
:mod:`.levers.data_preview`), as ``user_expressions`` beside an empty cell: no
execution count, no names left behind, nothing in the clean notebook. Small models
otherwise spend whole runs on a library that is not there or on guessing a column's
name (``row_mz`` for ``row m/z``).
"""

from __future__ import annotations

from pathlib import Path

from ..executors.base import AsyncExecutor
from ..kernel_state.kernel_probe import (
    LIBRARY_PROBE_CODE,
    describe_libraries,
    parse_library_probe,
)
from ..prompts import prompt
from ..settings import Settings

__all__ = ["PROBE_TIMEOUT_S", "briefing_cell", "probe_libraries", "prompt_cwd", "system_prompt"]

#: how long a silent probe of the kernel may take (the libraries, the data preview)
PROBE_TIMEOUT_S = 60.0


async def probe_libraries(executor: AsyncExecutor) -> tuple[dict[str, str], str]:
    """``({import name: version}, one line for the system prompt)``; empty if not Python."""
    if executor.language_info.get("name") != "python":
        return {}, ""
    try:
        result = await executor.execute(
            "", timeout=PROBE_TIMEOUT_S, user_expressions={"libraries": LIBRARY_PROBE_CODE}
        )
    except Exception:  # a probe never fails a run
        return {}, ""
    found = parse_library_probe(result.user_expressions.get("libraries"))
    return found, describe_libraries(found) if found else ""


def prompt_cwd(executor: AsyncExecutor | None, remote_work: str | None, work: Path) -> str:
    """Where the model is told its code runs: a remote kernel's own work dir if known, else
    ``work``; "" for a private one (a sandbox's room: a new path each kernel would make two
    runs of one task differ at temperature 0)."""
    if remote_work:
        return remote_work
    private = executor is not None and executor.kernel_cwd not in (None, executor.cwd)
    return "" if private else str(work)


def system_prompt(
    settings: Settings,
    executor: AsyncExecutor,
    protocol: str,
    libraries_note: str,
    host_section: str,
    cwd: str,
) -> str:
    """The system prompt: the kernel, how to run code (``protocol``), what it can import,
    the host tools; last the work dir ``cwd`` (not named when "": a private one)."""
    language = executor.language_info.get("name", "python")
    how = prompt(f"run_{protocol}", language=language, fence_lang=language)
    vision = " and the image itself" if settings.vision else ""
    system = prompt(
        "system",
        language=language,
        kernel_display=executor.kernelspec.get("display_name", language),
        how_to_run=how,
        vision_note=vision,
        data_note=(
            prompt("data_note_python")
            if language == "python"
            else prompt("code_note_other", language=language)
        )
        + "\n",
    )
    if libraries_note:
        system += f"\n{libraries_note}"
    if host_section:
        system += f"\n\n{host_section}"
    # last: the one line that differs between two directories, and everything before it
    # is a prefix a warm local model has already evaluated
    where = prompt("workdir", cwd=cwd) if cwd else prompt("workdir_private")
    return f"{system}\n\n{where.strip()}"


def briefing_cell(note: str) -> str:
    """A briefing note as the notebook shows it: its first line as text, the rest verbatim."""
    head, _, body = note.partition("\n")
    return f"{head}\n\n```text\n{body}\n```" if body else head
