"""A generator of hostile iopub messages: each field of each message type in turn,
filled with megabytes, and floods of many small messages.

A case is Python source, so the same case runs in the test process (pure units of the
OutputCollector, with :func:`messages`) and inside a real kernel, which sends it on its
iopub socket through its own session (:func:`kernel_code`). ``BIG`` is the filler; in
the kernel it is built there, so no test process holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Case", "CASES", "kernel_code", "messages"]


@dataclass(frozen=True)
class Case:
    name: str
    #: Python source of the messages to send: a list of ``(msg_type, content)``
    source: str
    #: how many times the list is sent (a cell over its budget, a run over its own)
    repeat: int = 3


def _content_cases() -> list[Case]:
    bundle = '{"data": {"text/plain": "small"}, "metadata": {}, "transient": {}}'
    cases = []

    def add(name: str, msg_type: str, content: str, repeat: int = 3) -> None:
        cases.append(Case(name, f"[({msg_type!r}, {content})]", repeat))

    # stream
    add("stream.text", "stream", '{"name": "stdout", "text": BIG}')
    add("stream.text_newlines", "stream", '{"name": "stdout", "text": "\\n" * len(BIG)}')
    add("stream.text_escapes", "stream", '{"name": "stderr", "text": "\\x01" * len(BIG)}')
    add("stream.name", "stream", '{"name": BIG, "text": "t"}')
    add("stream.extra_key", "stream", '{"name": "stdout", "text": "t", "x": BIG}')
    # display_data and execute_result: every field, nested keys too
    for kind in ("display_data", "execute_result"):
        count = ', "execution_count": 1' if kind == "execute_result" else ""

        def bundle_with(field: str, kind: str = kind, count: str = count) -> str:
            fields = {"data": '{"text/plain": "small"}', "metadata": "{}", "transient": "{}"}
            fields.update(dict([field.split("=", 1)]))
            inner = ", ".join(f'"{k}": {v}' for k, v in fields.items())
            return "{" + inner + count + "}"

        add(f"{kind}.data.text", kind, bundle_with('data={"text/plain": BIG}'))
        add(f"{kind}.data.png", kind, bundle_with('data={"image/png": BIG}'))
        add(f"{kind}.data.html_escapes", kind, bundle_with('data={"text/html": "<" * len(BIG)}'))
        add(
            f"{kind}.data.json_nested", kind, bundle_with('data={"application/json": {"a": [BIG]}}')
        )
        add(f"{kind}.data.mime_key", kind, bundle_with('data={BIG: "v"}'))
        add(
            f"{kind}.data.many_mimes",
            kind,
            bundle_with('data={f"text/x{i}": "v" * 4000 for i in range(len(BIG) // 4000)}'),
        )
        add(f"{kind}.metadata", kind, bundle_with('metadata={"m": BIG}'))
        add(f"{kind}.metadata.key", kind, bundle_with("metadata={BIG: 1}"))
        add(
            f"{kind}.metadata.image_size",
            kind,
            bundle_with('metadata={"image/png": {"width": BIG, "height": 10**30}}'),
        )
        add(f"{kind}.metadata.list", kind, bundle_with('metadata={"l": [0] * (len(BIG) // 4)}'))
        add(f"{kind}.transient", kind, bundle_with('transient={"x": BIG}'))
        add(f"{kind}.transient.display_id", kind, bundle_with('transient={"display_id": BIG}'))
    add(
        "execute_result.execution_count",
        "execute_result",
        '{"data": {"text/plain": BIG}, "metadata": {"m": BIG}, "execution_count": 10**30}',
    )
    add("execute_result.negative_count", "execute_result", bundle[:-1] + ', "execution_count": -5}')
    # error
    add("error.ename", "error", '{"ename": BIG, "evalue": "v", "traceback": []}')
    add("error.evalue", "error", '{"ename": "E", "evalue": BIG, "traceback": []}')
    add("error.traceback_line", "error", '{"ename": "E", "evalue": "v", "traceback": [BIG]}')
    add(
        "error.traceback_lines",
        "error",
        '{"ename": "E", "evalue": "v", "traceback": [BIG[:1_000_000]] * (len(BIG) // 1_000_000)}',
    )
    add(
        "error.traceback_many_short",
        "error",
        '{"ename": "E", "evalue": "v", "traceback": ["x"] * (len(BIG) // 8)}',
    )
    add("error.extra_key", "error", '{"ename": "E", "evalue": "v", "traceback": [], "x": BIG}')
    # display updates: 32 outputs share one id, then the update lands in all of them
    shows = '[("display_data", {"data": {"text/plain": "d"}, "metadata": {}, "transient": {"display_id": "same"}})] * 32'
    for field, value in (
        ("data", '{"data": {"text/plain": BIG}, "metadata": {}'),
        ("metadata", '{"data": {"text/plain": "u"}, "metadata": {"m": BIG}'),
        ("data_and_metadata", '{"data": {"text/plain": BIG[:999_000]}, "metadata": {"m": BIG}'),
        ("nested", '{"data": {"application/json": {"a": {"b": [BIG]}}}, "metadata": {}'),
    ):
        update = f'("update_display_data", {value}, "transient": {{"display_id": "same"}}}})'
        cases.append(Case(f"update_display_data.{field}", f"{shows} + [{update}]", 2))
    cases.append(
        Case(
            "update_display_data.display_id",
            '[("update_display_data", {"data": {}, "metadata": {}, "transient": {"display_id": BIG}})]',
        )
    )
    # the rest: whatever they hold, the host keeps none of it
    add("clear_output.wait", "clear_output", '{"wait": BIG}')
    add(
        "comm_open.data",
        "comm_open",
        '{"comm_id": "c1", "target_name": "nobody", "data": {"x": BIG}}',
    )
    add("comm_open.target_name", "comm_open", '{"comm_id": "c2", "target_name": BIG, "data": {}}')
    add("comm_msg.data", "comm_msg", '{"comm_id": "c1", "data": {"x": BIG}}')
    add("comm_msg.comm_id", "comm_msg", '{"comm_id": BIG, "data": {}}')
    add("status.execution_state", "status", '{"execution_state": BIG}')
    add("execute_input.code", "execute_input", '{"code": BIG, "execution_count": 1}')
    add("execute_input.execution_count", "execute_input", '{"code": "", "execution_count": 10**30}')
    return cases


def _flood_cases() -> list[Case]:
    """Many small messages: each one far under every bound, all of them together not."""
    return [
        Case(
            "many.displays",
            '[("display_data", {"data": {"text/plain": "d" * 1000}, "metadata": {"m": "x" * 3000},'
            ' "transient": {"display_id": f"id{i}"}}) for i in range(len(BIG) // 1000)]',
            1,
        ),
        Case(
            "many.updates",
            '[("display_data", {"data": {"text/plain": "d"}, "metadata": {}, '
            '"transient": {"display_id": f"id{i}"}}) for i in range(40)] + '
            '[("update_display_data", {"data": {"text/plain": "u" * 900_000}, '
            '"metadata": {"m": "z" * 3_000}, "transient": {"display_id": f"id{i % 40}"}}) '
            "for i in range(300)]",
            1,
        ),
        Case(
            "many.errors",
            '[("error", {"ename": "E" * 100, "evalue": "v" * 100_000, "traceback": ["t" * 1000] * 100})'
            " for i in range(len(BIG) // 200_000)]",
            1,
        ),
        Case(
            "many.stream_switches",
            '[(("stream", {"name": "stdout" if i % 2 else "stderr", "text": "s" * 50_000}))'
            " for i in range(len(BIG) // 50_000)]",
            1,
        ),
    ]


CASES: list[Case] = _content_cases() + _flood_cases()


def messages(case: Case, big: int) -> list[dict[str, Any]]:
    """The case's messages, as jupyter_client would hand them to the host."""
    scope: dict[str, Any] = {"BIG": "x" * big}
    pairs = eval(case.source, scope)  # noqa: S307 - our own test source
    out = []
    for _ in range(case.repeat):
        for msg_type, content in pairs:
            out.append(
                {
                    "header": {"msg_type": msg_type, "msg_id": "m"},
                    "msg_type": msg_type,
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                }
            )
    return out


def kernel_code(case: Case, big: int) -> str:
    """A cell that makes the kernel send the case on its iopub socket, then prints."""
    return (
        "from ipykernel.kernelbase import Kernel\n"
        "k = Kernel.instance(); sess = k.session; parent = k.get_parent('shell')\n"
        f"BIG = 'x' * {big}\n"
        f"for _ in range({case.repeat}):\n"
        f"    for msg_type, content in {case.source}:\n"
        "        sess.send(k.iopub_socket, msg_type, content, parent=parent)\n"
        "del BIG\n"
        f"print('case done: {case.name}')\n"
    )
