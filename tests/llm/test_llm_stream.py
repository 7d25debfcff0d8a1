"""Pure units: the stream accumulator, code-block extraction, model specs, protocols."""

from __future__ import annotations

import pytest

from kernel_agent.errors import ConfigError
from kernel_agent.llm.protocol import (
    RUN_CELL_TOOL,
    choose_protocol,
    image_part,
    parse_model_spec,
    split_code,
    user_message,
)
from kernel_agent.llm.stream import (
    Completion,
    ReasoningDelta,
    StreamAccumulator,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    parse_tool_arguments,
)
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(10)


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "x", "model": "m", "choices": choices, "usage": usage}


def code_blocks(text: str, language: str | None = "python", **kw: bool) -> list[str]:
    return split_code(text, language, **kw)[0]


def feed_all(chunks: list[dict]) -> tuple[list, Completion]:
    acc = StreamAccumulator()
    deltas = [d for c in chunks for d in acc.feed(c)]
    return deltas, acc.result()


# -- accumulator -----------------------------------------------------------------------


def test_text_deltas_and_usage() -> None:
    deltas, result = feed_all(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
            chunk({}, "stop"),
            chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}),
        ]
    )
    assert deltas == [TextDelta("Hel"), TextDelta("lo")]
    assert result.text == "Hello"
    assert result.finish_reason == "stop"
    assert result.usage == Usage(7, 2, 9)
    assert result.tool_calls == ()
    assert result.assistant_message() == {"role": "assistant", "content": "Hello"}


def test_tool_call_split_across_chunks_openai_style() -> None:
    head = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "run_cell", "arguments": ""},
    }
    deltas, result = feed_all(
        [
            chunk({"role": "assistant", "content": None, "tool_calls": [head]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"co'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'de": "1+1"}'}}]}),
            chunk({}, "tool_calls"),
        ]
    )
    assert deltas[0] == ToolCallDelta(0, "run_cell", "")
    assert [d.arguments for d in deltas[1:]] == ['{"co', 'de": "1+1"}']
    assert result.tool_calls == (
        ToolCall("call_1", "run_cell", '{"code": "1+1"}', {"code": "1+1"}, None),
    )
    assert result.tool_calls[0].code == "1+1"
    assert result.finish_reason == "tool_calls"
    assert result.usage is None
    msg = result.assistant_message()
    assert msg["content"] is None
    assert msg["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "run_cell", "arguments": '{"code": "1+1"}'},
        }
    ]


def test_several_tool_calls_interleaved_and_quirky_servers() -> None:
    # index missing (position used), name and id repeated on every chunk, no id at all
    acc = StreamAccumulator()
    for c in [
        chunk(
            {"tool_calls": [{"id": "a", "function": {"name": "run_cell", "arguments": '{"code":'}}]}
        ),
        chunk({"tool_calls": [{"index": 1, "function": {"name": "run_cell", "arguments": "{}"}}]}),
        chunk(
            {"tool_calls": [{"id": "a", "function": {"name": "run_cell", "arguments": ' "x"}'}}]}
        ),
        chunk({}, "tool_calls"),
    ]:
        acc.feed(c)
    result = acc.result()
    first, second = result.tool_calls
    assert (first.id, first.name, first.args) == ("a", "run_cell", {"code": "x"})
    assert second.name == "run_cell" and second.args == {}
    assert second.id.startswith("call_")
    assert acc.result() == result  # a made-up id stays the same


def test_malformed_arguments_reported_not_raised() -> None:
    _, result = feed_all(
        [
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "function": {"name": "run_cell", "arguments": '{"code": "x'},
                        }
                    ]
                }
            )
        ]
    )
    (call,) = result.tool_calls
    assert call.args is None and call.code is None
    assert call.parse_error is not None and "not valid JSON" in call.parse_error
    assert call.arguments == '{"code": "x'


@pytest.mark.parametrize(
    ("raw", "args", "error"),
    [
        ("", {}, None),
        ("{}", {}, None),
        ('{"code": "1"}', {"code": "1"}, None),
        ("[1]", None, "list"),
        ("nope", None, "JSON"),
    ],
)
def test_parse_tool_arguments(raw: str, args: dict | None, error: str | None) -> None:
    got_args, got_error = parse_tool_arguments(raw)
    assert got_args == args
    assert (got_error is None) == (error is None)
    if error:
        assert error in (got_error or "")


def test_reasoning_and_other_choices_and_objects() -> None:
    class Obj:
        def __init__(self, **kw: object) -> None:
            self.__dict__.update(kw)

    acc = StreamAccumulator()
    out = acc.feed(
        Obj(
            model="m",
            usage=None,
            choices=[
                Obj(index=0, finish_reason=None, delta=Obj(reasoning_content="hmm", content="A"))
            ],
        )
    )
    assert out == [ReasoningDelta("hmm"), TextDelta("A")]
    assert acc.feed({"choices": [{"index": 1, "delta": {"content": "other"}}]}) == []
    assert acc.result().text == "A" and acc.result().reasoning == "hmm"


def test_usage_last_wins_and_sums() -> None:
    acc = StreamAccumulator()
    acc.feed(
        chunk(
            {"content": "a"}, usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        )
    )
    acc.feed(chunk({}, "length", usage={"prompt_tokens": 1, "completion_tokens": 5}))
    result = acc.result()
    assert result.usage == Usage(1, 5, 6)
    assert result.truncated
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)
    assert Usage(source="") + Usage(1, 1, 2) == Usage(1, 1, 2)  # "" is no call yet
    assert not (Usage(source="") + Usage(source="")).reported
    assert (Usage(1, 1, 2) + Usage(1, 1, 2, source="counted")).source == "counted"


# -- fenced code -----------------------------------------------------------------------


def test_extract_python_blocks() -> None:
    text = (
        "First:\n```python\nimport pandas as pd\nprint(1)\n```\n"
        "Shell, not ours:\n```bash\nls\n```\n"
        "Bare:\n```\nx = 2\n```\n"
        "Short tag:\n```py\ny = 3\n```\n"
        "Output:\n```text\n1\n```\n"
    )
    assert code_blocks(text) == ["import pandas as pd\nprint(1)", "x = 2", "y = 3"]
    assert code_blocks(text, "bash") == ["ls", "x = 2"]
    assert len(code_blocks(text, None)) == 5


def test_extract_unclosed_trailing_block() -> None:
    text = "Here:\n```python\nfor i in range(3):\n    print(i)\n"
    assert code_blocks(text) == ["for i in range(3):\n    print(i)"]
    assert code_blocks(text, include_unclosed=False) == []


def test_extract_tolerates_model_quirks() -> None:
    assert code_blocks("1. Load:\n   ```python\n   df = 1\n   if df:\n       pass\n   ```") == [
        "df = 1\nif df:\n    pass"
    ]
    assert code_blocks("Sure! ```python\nprint(2)\n```") == ["print(2)"]
    assert code_blocks("```python\nprint(3)```") == ["print(3)"]
    assert code_blocks("~~~{python}\nprint(4)\n~~~") == ["print(4)"]
    assert code_blocks("````python\nprint('```')\n````") == ["print('```')"]
    assert code_blocks("```Python3 title=x\nprint(5)\n```") == ["print(5)"]
    assert code_blocks("```python\na = 1\n```python\nb = 2\n```") == ["a = 1", "b = 2"]
    assert code_blocks("```python\n\n```\nno code here") == []
    assert code_blocks("inline ```code``` is not a block") == []


# -- specs, protocols, messages ----------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("gpt-4o-mini", (None, "gpt-4o-mini")),
        ("qwen2.5-coder:1.5b", (None, "qwen2.5-coder:1.5b")),
        ("local", ("local", "")),
        ("local:/models/x.gguf", ("local", "/models/x.gguf")),
        ("OpenAI:gpt-4o", ("openai", "gpt-4o")),
    ],
)
def test_parse_model_spec(spec: str, expected: tuple[str | None, str]) -> None:
    assert parse_model_spec(spec) == expected


@pytest.mark.parametrize("spec", ["", "  ", "openai:"])
def test_parse_model_spec_rejects(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_model_spec(spec)


def test_choose_protocol() -> None:
    assert choose_protocol(Settings(model="gpt-4o")) == "tools"
    assert choose_protocol(Settings(model="local")) == "fenced"
    assert choose_protocol(Settings(model="local:/m.gguf")) == "fenced"
    assert choose_protocol(Settings(model="local", protocol="tools")) == "tools"
    assert choose_protocol(Settings(model="gpt-4o", protocol="fenced")) == "fenced"
    assert choose_protocol(Settings(model="qwen"), model="local") == "fenced"
    assert choose_protocol(Settings()) == "tools"


def test_run_cell_tool_schema() -> None:
    fn = RUN_CELL_TOOL["function"]
    assert RUN_CELL_TOOL["type"] == "function" and fn["name"] == "run_cell"
    assert fn["parameters"]["required"] == ["code"]


def test_image_messages() -> None:
    raw = image_part(b"\x89PNG")
    assert raw == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
    nb = image_part("iVBO\nRw==\n", "image/jpeg", detail="low")
    assert nb["image_url"] == {"url": "data:image/jpeg;base64,iVBORw==", "detail": "low"}
    assert user_message("hi") == {"role": "user", "content": "hi"}
    msg = user_message("look", [raw])
    assert msg["content"] == [{"type": "text", "text": "look"}, raw]


def test_one_provider_table_drives_specs_endpoints_and_local_checks() -> None:
    from kernel_agent.llm.endpoint import is_local, resolve_endpoint
    from kernel_agent.llm.local_model import is_local_model
    from kernel_agent.llm.providers import PROVIDERS
    from kernel_agent.settings import Settings

    for name, provider in PROVIDERS.items():
        if provider.local:
            continue
        assert parse_model_spec(f"{name}:m") == (name, "m")
        ep = resolve_endpoint(Settings(home=".", model=f"{name}:m", api_key="k"))
        assert ep.provider == name and ep.model == "m" and ep.base_url == provider.base_url
    assert parse_model_spec("ollama:qwen2.5:7b") == ("ollama", "qwen2.5:7b")
    for spec in (None, "local", "local:/m.gguf"):
        assert is_local_model(spec) and is_local(Settings(home=".", model=spec))
    assert not is_local_model("localhost-model") and not is_local_model("ollama:local")
    assert not is_local(Settings(home=".", api_key="k"))
