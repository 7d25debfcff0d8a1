"""A reply without code, an answer composed from the last cell's output, a fresh start.

The loop asks these when a turn may settle the run: :func:`settle_answer` takes the
model's answer unless the reply was cut off, or a lever asks again or ends the run without
it (the refused reply is kept in the transcript as a note, which the eval scores);
:func:`compose_answer` lets a lever answer from printed values without another model turn;
:func:`start_over` lets a lever start the task over where the run would give up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from ..events import Event, Notice, RunResult
from ..kernel_state import KernelState
from ..llm.stream import Completion
from ..llm.view import render_cell
from ..notebook import cellmeta as M
from ..prompts import prompt
from .asked_form import in_asked_form
from .history import History
from .levers.base import Lever
from .state import Ask, Stop, TaskState, Turn

__all__ = ["compose_answer", "finish_answer", "settle_answer", "start_afresh", "start_over"]


async def settle_answer(
    levers: Sequence[Lever],
    state: KernelState,
    history: History,
    st: TaskState,
    result: RunResult,
    completion: Completion,
    turn: Turn,
    gen_s: float,
) -> AsyncIterator[Event]:
    """The answer into ``result``, or the reply sent back with the first lever's ask."""
    answer = turn.prose.strip() or completion.text.strip()
    if completion.truncated:
        st.steps += 1  # bounded by max_steps, like a cell
        by = "reply_truncated"
        ask: Ask | Stop | None = Ask(
            prompt("reply_truncated"),
            notice="the model's reply was cut off at the token limit; asking for a shorter one",
        )
    else:
        by, ask = _first((lever.name, lever.on_answer(st, answer)) for lever in levers)
        if ask is None:
            result.answer = answer
            result.status = "ok" if st.ran_code else "no_code"
            return
    assert ask is not None
    why = ask.notice or "asked the model again"
    quoted = "\n".join(f"> {line}" for line in answer[:1500].splitlines()) or "> (empty)"
    # the lever and the reply it refused: the eval scores that reply (a lever's precision)
    state.note(
        f"*kernel-agent: {why}.* The reply was:\n\n{quoted}",
        M.ROLE_NOTE,
        **{M.GEN_S: round(gen_s, 3), M.LEVER: by, "reply": answer[:4000]},
    )
    if isinstance(ask, Stop):  # a lever ends the run without this answer
        result.status, result.answer = ask.status, ask.answer
        if ask.notice:
            yield Notice(ask.notice, "warning")
        return
    st.told.append(ask.message)
    history.user(ask.message)
    if ask.notice:
        yield Notice(ask.notice)


def compose_answer(
    levers: Sequence[Lever], history: History, st: TaskState, result: RunResult
) -> Notice | None:
    """The final answer made from the last cell's output by a lever, with no model turn
    (none while a lever's note on that cell is unread)."""
    if st.doubts:
        return None
    for lever in levers:
        answer = lever.compose(st)
        if answer:
            result.answer, result.status = answer, "ok"
            st.composed_by = lever.name
            history.assistant({"role": "assistant", "content": answer})
            return Notice("the last cell printed every asked value; answered from them")
    return None


def finish_answer(st: TaskState, result: RunResult) -> tuple[dict[str, object], Notice | None]:
    """The settled answer written in the form the task asks (:mod:`.asked_form`), and the
    answer cell's metadata: which lever composed it, and the answer as first written when
    a value was put in the asked form."""
    meta: dict[str, object] = {"composed_by": st.composed_by} if st.composed_by else {}
    if result.status not in ("ok", "no_code"):
        return meta, None
    printed = "\n".join(render_cell(cell, budget=4000).text for cell in st.cells[-20:])
    answer, reformed = in_asked_form(st.task, result.answer, printed)
    if not reformed:
        return meta, None
    meta.update(as_answered=result.answer[:4000], reformed=[r.describe() for r in reformed[:10]])
    result.answer = answer
    shown = "; ".join(r.describe() for r in reformed[:3])
    return meta, Notice(f"the answer is written in the form the task asks: {shown}")


def start_over(
    levers: Sequence[Lever], state: KernelState, history: History, st: TaskState
) -> Notice | None:
    """The failing cells in a row reached their bound: the first lever's fresh start
    instead of giving up (the conversation goes back to the task; the kernel keeps its
    state), or None. The transcript notes which lever it was."""
    by, ask = _first((lever.name, lever.on_give_up(st)) for lever in levers)
    if not isinstance(ask, Ask):
        return None
    why = ask.notice or "starting the task over"
    state.note(f"*kernel-agent: {why}.*", M.ROLE_NOTE, **{M.LEVER: by})
    start_afresh(history, st, ask)
    return Notice(why)


def start_afresh(history: History, st: TaskState, ask: Ask) -> None:
    """An ask that forgets the attempt (``Ask.rewind``): the conversation goes back to the
    task and then the ask; the failing cells in a row count from 0, and the ask's sampling
    holds from here. For a repeated failing cell and at the bound of failing cells alike."""
    st.failures, st.sampling = 0, dict(ask.sampling)
    st.told.append(ask.message)
    history.rewind(st.history_start)
    history.user(ask.message)


def _first(
    asks: Iterator[tuple[str, Ask | Stop | None]],
) -> tuple[str, Ask | Stop | None]:
    """The first lever's ask and its name (later levers are not consulted once one asks)."""
    return next(((name, ask) for name, ask in asks if ask is not None), ("", None))
