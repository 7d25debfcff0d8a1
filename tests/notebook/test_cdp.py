"""cdp.Frames: NUL-separated DevTools messages out of a byte stream, bounded."""

from __future__ import annotations

import pytest

from kernel_agent.errors import ExportError
from kernel_agent.notebook.cdp import Frames


def test_messages_split_anywhere_come_out_whole() -> None:
    frames = Frames(max_message=1000)
    assert frames.feed(b'{"id": 1, "res') == []
    assert frames.feed(b'ult": {}}\0{"method": "x"}\0[1]\0{"id"') == [
        {"id": 1, "result": {}},
        {"method": "x"},
    ]  # a list is not a message: dropped
    assert frames.feed(b": 2}\0") == [{"id": 2}]


def test_a_message_over_the_bound_or_not_json_is_an_error() -> None:
    with pytest.raises(ExportError, match="over 10 bytes"):
        Frames(max_message=10).feed(b'{"id": 1, "result": "long"')
    with pytest.raises(ExportError, match="not JSON"):
        Frames(max_message=10).feed(b"{oops\0")
