"""OutputCollector: pure units fed hand-built iopub messages."""

from __future__ import annotations

import copy
import time
import tracemalloc
from typing import Any

import nbformat
import pytest

from kernel_agent.notebook.outputs import OutputCollector, resolve_control_chars, truncation_marker


def msg(msg_type: str, **content: Any) -> dict[str, Any]:
    return {
        "header": {"msg_type": msg_type, "msg_id": "m"},
        "parent_header": {"msg_id": "parent"},
        "metadata": {},
        "content": content,
    }


def stream(text: str, name: str = "stdout") -> dict[str, Any]:
    return msg("stream", name=name, text=text)


def display(data: dict[str, Any], display_id: str | None = None, kind: str = "display_data"):
    transient = {"display_id": display_id} if display_id else {}
    return msg(kind, data=data, metadata={}, transient=transient)


def collect(*messages: dict[str, Any], **kw: Any) -> OutputCollector:
    collector = OutputCollector(**kw)
    for m in messages:
        collector.feed(m)
    return collector


def kinds(collector: OutputCollector) -> list[str]:
    return [
        o.output_type + (f":{o.name}" if o.output_type == "stream" else "")
        for o in collector.outputs
    ]


# ------------------------------------------------------------------ streams
def test_adjacent_streams_of_one_name_are_coalesced() -> None:
    c = collect(stream("a"), stream("b\n"), stream("c"))
    assert kinds(c) == ["stream:stdout"]
    assert c.outputs[0].text == "ab\nc"


def test_only_adjacent_streams_are_coalesced() -> None:
    c = collect(stream("1"), stream("e", "stderr"), stream("2"))
    assert kinds(c) == ["stream:stdout", "stream:stderr", "stream:stdout"]
    assert [o.text for o in c.outputs] == ["1", "e", "2"]
    c = collect(stream("1"), display({"text/plain": "D"}), stream("2"))
    assert kinds(c) == ["stream:stdout", "display_data", "stream:stdout"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("10%\r20%\r100%\n", "100%\n"),
        ("a\r\nb", "a\nb"),
        ("keep\rpending\r", "pending\r"),  # a final \r waits for what follows
        ("abc\b\bd", "ad"),
        ("line1\nxx\b\b\byy", "line1\n\byy"),  # \b never crosses a newline
        ("no control characters", "no control characters"),
    ],
)
def test_resolve_control_chars(text: str, shown: str) -> None:
    assert resolve_control_chars(text) == shown


def test_progress_bar_across_chunks() -> None:
    chunks = ["Loading\n"] + [f"\r[{'#' * i}{'.' * (5 - i)}] {i * 20}%" for i in range(6)]
    c = collect(*(stream(ch) for ch in chunks), stream("\ndone\n"))
    assert c.outputs[0].text == "Loading\n[#####] 100%\ndone\n"


def test_carriage_return_then_newline_split_across_chunks() -> None:
    c = collect(stream("a\r"), stream("\nb"))
    assert c.outputs[0].text == "a\nb"


def test_backspace_spinner_across_chunks() -> None:
    c = collect(stream("working |"), stream("\b/"), stream("\b-"), stream("\b done\n"))
    assert c.outputs[0].text == "working  done\n"


def test_many_small_chunks_are_linear() -> None:
    # 200,000 one-line chunks (print(i, flush=True) in a loop) once took minutes.
    start = time.perf_counter()
    c = collect(*(stream(f"{i}\n") for i in range(200_000)), max_chars=10_000_000)
    assert time.perf_counter() - start < 10
    text = c.outputs[0].text
    assert text.startswith("0\n1\n") and text.endswith("199999\n")


def test_a_long_line_is_linear() -> None:
    # print("x" * 200_000) once took 23 s: the \r regex backtracked from every position.
    start = time.perf_counter()
    c = collect(stream("x" * 300_000 + "\nbar 1\rbar 2\n"))
    assert time.perf_counter() - start < 1
    assert c.outputs[0].text == "x" * 300_000 + "\nbar 2\n"


# ------------------------------------------------------------- clear_output
def test_clear_output_wait_is_deferred_until_next_output() -> None:
    c = collect(stream("old\n"), msg("clear_output", wait=True))
    assert [o.text for o in c.outputs] == ["old\n"]
    c.feed(stream("new\n"))
    assert [o.text for o in c.outputs] == ["new\n"]


def test_clear_output_without_wait_is_immediate() -> None:
    c = collect(stream("old\n"), display({"text/plain": "x"}), msg("clear_output", wait=False))
    assert c.outputs == []
    c.feed(stream("new"))
    assert [o.text for o in c.outputs] == ["new"]


def test_clear_output_animation_keeps_last_frame_only() -> None:
    frames = []
    for i in range(5):
        frames += [msg("clear_output", wait=True), display({"text/plain": f"frame {i}"}, "anim")]
    c = collect(*frames)
    assert [o.data["text/plain"] for o in c.outputs] == ["frame 4"]
    assert len(c.display_map["anim"]) == 1  # cleared frames are not kept alive


# ---------------------------------------------------------- display updates
def test_update_display_data_patches_earlier_cell_through_shared_map() -> None:
    shared: dict = {}
    first = collect(display({"text/plain": "one"}, "d1"), display_map=shared)
    second = collect(
        msg(
            "update_display_data",
            data={"text/plain": "two"},
            metadata={},
            transient={"display_id": "d1"},
        ),
        display_map=shared,
    )
    assert first.outputs[0].data == {"text/plain": "two"}
    assert second.outputs == []


def test_update_of_unknown_display_id_is_ignored() -> None:
    c = collect(
        display({"text/plain": "keep"}, "a"),
        msg(
            "update_display_data",
            data={"text/plain": "x"},
            metadata={},
            transient={"display_id": "b"},
        ),
    )
    assert [o.data for o in c.outputs] == [{"text/plain": "keep"}]


def test_new_display_with_known_id_updates_earlier_ones() -> None:
    # Jupyter front ends and nbclient do this: both outputs end up showing "b".
    c = collect(display({"text/plain": "a"}, "same"), display({"text/plain": "b"}, "same"))
    assert [o.data["text/plain"] for o in c.outputs] == ["b", "b"]


# ---------------------------------------------------------- results, errors
def test_execute_result_and_count() -> None:
    c = collect(
        msg("execute_input", code="1+1", execution_count=7),
        msg("execute_result", data={"text/plain": "2"}, metadata={}, execution_count=7),
    )
    assert c.execution_count == 7
    (out,) = c.outputs
    assert out.output_type == "execute_result"
    assert out.execution_count == 7 and out.data == {"text/plain": "2"}


def test_error_is_captured_with_plain_traceback() -> None:
    tb = ["\x1b[0;31mZeroDivisionError\x1b[0m  Traceback", "\x1b[1;32m----> 1\x1b[0m 1/0"]
    c = collect(msg("error", ename="ZeroDivisionError", evalue="division by zero", traceback=tb))
    assert c.error is not None
    assert (c.error.ename, c.error.evalue) == ("ZeroDivisionError", "division by zero")
    assert c.error.plain_traceback == "ZeroDivisionError  Traceback\n----> 1 1/0"
    assert c.outputs[0].output_type == "error" and c.outputs[0].traceback == tb


def test_messages_that_are_not_outputs_are_ignored() -> None:
    c = collect(msg("status", execution_state="busy"), msg("comm_open", comm_id="x", data={}))
    assert c.outputs == [] and c.error is None


# ------------------------------------------------------------------ bounds
def test_huge_stream_is_truncated_with_bounded_memory() -> None:
    limit = 100_000
    chunk = "x" * (64 * 1024 - 1) + "\n"
    total = 100 * 1024 * 1024
    n = total // len(chunk)
    collector = OutputCollector(max_chars=limit)
    tracemalloc.start()
    try:
        collector.feed(stream("FIRST LINE\n"))
        for _ in range(n):
            collector.feed(stream(chunk))
        collector.feed(stream("LAST LINE\n"))
        text = collector.outputs[0].text
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    fed = len("FIRST LINE\n") + n * len(chunk) + len("LAST LINE\n")
    marker = truncation_marker(fed - limit)
    assert len(text) == limit + len(marker)
    assert text.startswith("FIRST LINE\n") and text.endswith("x\nLAST LINE\n")
    assert marker in text
    assert peak < 20 * limit + 4 * len(chunk)  # a few copies of the kept text, not 100 MB


def test_huge_single_line_is_truncated() -> None:
    c = collect(*(stream("y" * 10_000) for _ in range(100)), max_chars=5_000)
    text = c.outputs[0].text
    marker = truncation_marker(1_000_000 - 5_000)
    assert len(text) == 5_000 + len(marker) and marker in text


def test_oversized_text_plain_is_cut_and_other_mime_dropped_with_note() -> None:
    big_png = "iVBOR" + "A" * 5_000
    c = collect(
        display({"text/plain": "p" * 3_000, "image/png": big_png, "text/html": "<b>ok</b>"}),
        max_chars=1_000,
    )
    data = c.outputs[0].data
    assert "image/png" not in data
    assert data["text/html"] == "<b>ok</b>"
    assert (
        "[kernel-agent: omitted oversized image/png (more than 1,000 characters)]"
        in data["text/plain"]
    )
    assert "output truncated, 2,000 characters omitted" in data["text/plain"]


def test_oversized_update_is_bounded_too() -> None:
    c = collect(
        display({"text/plain": "small"}, "d"),
        msg(
            "update_display_data",
            data={"image/png": "A" * 5_000},
            metadata={},
            transient={"display_id": "d"},
        ),
        max_chars=1_000,
    )
    assert c.outputs[0].data == {
        "text/plain": "[kernel-agent: omitted oversized image/png (more than 1,000 characters)]"
    }


# ---------------------------------------------------------------- callback
def test_on_output_gets_each_new_piece() -> None:
    pieces: list = []
    collect(
        stream("a"),
        stream("b"),
        display({"text/plain": "D"}, "d"),
        msg(
            "update_display_data",
            data={"text/plain": "E"},
            metadata={},
            transient={"display_id": "d"},
        ),
        msg("error", ename="E", evalue="v", traceback=[]),
        on_output=lambda piece: pieces.append(copy.deepcopy(piece)),  # as shown then
    )
    assert [(p.output_type, p.get("text") or p.get("data") or p.get("ename")) for p in pieces] == [
        ("stream", "a"),
        ("stream", "b"),
        ("display_data", {"text/plain": "D"}),
        ("display_data", {"text/plain": "E"}),
        ("error", "E"),
    ]


# ------------------------------------------------------------ per-cell bounds
def _chars(collector: OutputCollector) -> int:
    total = 0
    for out in collector.outputs:
        total += len(out.get("text", "")) + sum(len(str(v)) for v in out.get("data", {}).values())
    return total


def test_stream_switches_are_bounded_per_cell_with_one_note() -> None:
    # every switch opens a new output: 400 outputs of 50,000 characters, 20 M in all
    c = OutputCollector(max_chars=100_000, max_cell_chars=400_000)
    for i in range(200):
        c.feed(stream(f"o{i}:" + "o" * 50_000))
        c.feed(stream(f"e{i}:" + "e" * 50_000, "stderr"))
    outs = c.outputs
    notes = [o for o in outs if "outputs (" in o.get("text", "")]
    assert len(notes) == 1
    assert _chars(c) < 400_000 + 2 * 100_000
    assert outs[0].text.startswith("o0:")  # the head
    assert outs[-1].text.startswith("e199:")  # and the tail
    omitted = 400 - (len(outs) - 1)
    assert f"{omitted:,} outputs" in notes[0].text


def test_displays_and_images_count_towards_the_cell_bound() -> None:
    c = OutputCollector(max_chars=100_000, max_cell_chars=300_000)
    for i in range(50):
        c.feed(display({"text/plain": f"t{i}" + "y" * 60_000}))
        c.feed(display({"image/png": "A" * 60_000, "text/plain": f"<img {i}>"}))
    outs = c.outputs
    assert _chars(c) < 300_000 + 2 * 100_000
    assert outs[0].data["text/plain"].startswith("t0")
    assert outs[-1].data["text/plain"] == "<img 49>"
    assert sum("outputs (" in o.get("text", "") for o in outs) == 1


def test_the_number_of_outputs_is_bounded_too() -> None:
    c = OutputCollector(max_outputs=100)
    for i in range(5_000):
        c.feed(stream(f"{i}\n", "stdout" if i % 2 else "stderr"))
    outs = c.outputs
    assert len(outs) == 101  # 50 + the note + 50
    assert outs[0].text == "0\n" and outs[-1].text == "4999\n"
    assert "4,900 outputs (" in outs[50].text


def test_a_cleared_cell_starts_its_budget_again_and_has_no_note() -> None:
    c = OutputCollector(max_chars=1_000, max_cell_chars=2_000)
    for _i in range(20):
        c.feed(display({"text/plain": "z" * 900}))
    c.feed(msg("clear_output", wait=False))
    c.feed(stream("fresh\n"))
    assert [o.text for o in c.outputs] == ["fresh\n"]


def test_outputs_dropped_from_the_tail_leave_the_display_map() -> None:
    shared: dict = {}
    c = OutputCollector(max_chars=1_000, max_cell_chars=4_000, display_map=shared)
    for i in range(30):
        c.feed(display({"text/plain": "d" * 500}, f"id{i}"))
    kept = {id(o) for o in c.outputs}
    assert all(id(node) in kept for nodes in shared.values() for node in nodes)


def test_the_display_map_keeps_a_bounded_number_of_outputs() -> None:
    from kernel_agent.notebook.outputs import MAX_DISPLAY_NODES

    shared: dict = {}
    for _i in range(10):  # ten cells, each displaying the same id 20 times
        collect(*(display({"text/plain": "v"}, "same") for _ in range(20)), display_map=shared)
    assert sum(len(v) for v in shared.values()) <= MAX_DISPLAY_NODES


def test_many_mime_types_in_one_output_are_bounded_together() -> None:
    data = {f"text/x-{i}": "m" * 900 for i in range(50)}
    c = collect(display({**data, "text/plain": "p"}), max_chars=1_000)
    kept = c.outputs[0].data
    assert sum(len(v) for k, v in kept.items() if k != "text/plain") <= 1_000
    assert "omitted oversized" in kept["text/plain"]


def test_live_output_stops_after_half_the_budget_with_one_note() -> None:
    pieces: list = []
    c = OutputCollector(max_chars=10_000, max_cell_chars=40_000, on_output=pieces.append)
    for _ in range(100):
        c.feed(stream("s" * 5_000 + "\n"))
        c.feed(display({"text/plain": "d" * 5_000}))
    shown = sum(
        len(p.get("text", "")) + len(p.get("data", {}).get("text/plain", "")) for p in pieces
    )
    assert shown <= 20_000 + 500
    assert sum("not shown as it comes" in p.get("text", "") for p in pieces) == 1


# ------------------------------------------------------------ hostile messages
@pytest.mark.parametrize(
    "bad",
    [
        {"header": {"msg_type": "stream"}, "content": [1, 2]},
        {"header": {"msg_type": "stream"}, "content": {"name": 3, "text": "x"}},
        {"header": {"msg_type": "stream"}, "content": {"name": "stdout", "text": ["x"]}},
        {"header": {"msg_type": "display_data"}, "content": {"data": "not-a-dict"}},
        {"header": {"msg_type": "display_data"}, "content": {"data": {"text/plain": 5}}},
        {"header": {"msg_type": "display_data"}, "content": {"data": {}, "metadata": []}},
        {"header": {"msg_type": "display_data"}, "content": {"data": {}, "transient": "x"}},
        {"header": {"msg_type": "error"}, "content": {"ename": "E", "evalue": 1}},
        {
            "header": {"msg_type": "error"},
            "content": {"ename": "E", "evalue": "v", "traceback": [1]},
        },
        {"header": {"msg_type": "update_display_data"}, "content": {"data": 7}},
        {"header": {"msg_type": 5}, "content": {}},
        {"header": "nope", "content": {}},
        {"content": {}},
        [],
    ],
)
def test_a_malformed_message_is_dropped_and_counted(bad: Any) -> None:
    c = collect(stream("before\n"))
    c.feed(bad)
    c.feed(stream("after\n"))
    assert c.malformed == 1
    texts = [o.text for o in c.outputs]
    assert texts[0] == "before\nafter\n"
    assert "1 malformed kernel messages were dropped" in texts[-1]


def test_a_forged_execution_count_is_not_kept() -> None:
    c = collect(
        msg("execute_input", execution_count="seven"),
        msg("execute_result", data={"text/plain": "2"}, metadata={}, execution_count=True),
    )
    assert c.execution_count is None
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1+1", outputs=c.outputs)])
    nbformat.validate(nb)  # the result is dropped or kept without the count: valid either way
