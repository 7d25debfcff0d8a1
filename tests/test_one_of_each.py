"""The things there is one of: image types, the one-line message, token usage, run flags."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import shlex
from datetime import datetime, timezone
from pathlib import Path

import pytest
from nbformat.v4 import new_output

from kernel_agent.edges.images import IMAGE_EXTENSIONS, IMAGE_MIMES, RASTER_MIMES
from kernel_agent.errors import ConfigError, one_line
from kernel_agent.events import RunResult
from kernel_agent.frontends.commands.run import settings_from_args
from kernel_agent.frontends.render import save_images
from kernel_agent.llm.stream import Usage
from kernel_agent.llm.view import render_cell
from kernel_agent.results import CellResult
from kernel_agent.settings import Settings, add_model_options, option_flags

NOW = datetime.now(timezone.utc)
WEBP = base64.b64encode(b"RIFF\x1a\x00\x00\x00WEBPVP8L").decode()


def shown(mime: str, data: str, *, vision: bool = True) -> tuple[str, list[str]]:
    out = new_output("display_data", data={mime: data, "text/plain": "<Figure>"})
    view = render_cell(CellResult("x", "ok", 1, [out], None, NOW, NOW), budget=1000, vision=vision)
    return view.text, view.images


def test_every_image_type_has_an_extension_and_svg_is_not_raster() -> None:
    assert set(IMAGE_MIMES) == set(IMAGE_EXTENSIONS)
    assert "image/svg+xml" in IMAGE_MIMES and "image/svg+xml" not in RASTER_MIMES
    assert IMAGE_MIMES[0] == "image/png"  # preferred when a bundle holds several


def test_a_webp_image_reaches_a_vision_model_and_the_disk(tmp_path: Path) -> None:
    text, images = shown("image/webp", WEBP)
    assert images == [f"data:image/webp;base64,{WEBP}"] and "attached" in text
    out = new_output("display_data", data={"image/webp": WEBP})
    (path,) = save_images([out], tmp_path / "imgs", 3)
    assert path.name == "cell3_0.webp" and path.read_bytes() == base64.b64decode(WEBP)


def test_svg_is_described_to_the_model_not_attached() -> None:
    text, images = shown("image/svg+xml", "<svg/>")
    assert images == [] and "not shown to you" in text


def test_one_line_flattens_strips_colour_and_cuts() -> None:
    assert one_line("first\n  second\tthird") == "first second third"
    assert one_line("\x1b[31mred\x1b[0m error") == "red error"
    assert one_line("x" * 50, 10) == "xxxxxxx..." and len(one_line("y" * 500)) == 200
    assert one_line(ValueError("bad\nvalue")) == "bad value"


def test_usage_sums_and_knows_whether_it_was_reported() -> None:
    run = RunResult(answer="", status="ok", notebook=None).usage
    assert run == Usage(source="") and run.as_dict()["reported"] is False
    total = run + Usage(3, 4, 7) + Usage(1, 1, 2)
    assert total == Usage(4, 5, 9) and total.reported
    assert total.counts() == {"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9}
    assert total.as_dict() == {**total.counts(), "source": "reported", "reported": True}
    assert not (total + Usage(1, 1, 2, source="estimated")).reported


def test_every_run_flag_sets_the_settings_field_it_names(monkeypatch) -> None:
    for name in ("KERNEL_AGENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert set(option_flags()) <= {f.name for f in dataclasses.fields(Settings)}
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    argv = ["--model", "m", "--kernel", "k", "--file", "a.csv", "--max-steps", "3"]
    settings = settings_from_args(parser.parse_args([*argv, "--cell-timeout", "5"]))
    assert (settings.model, settings.kernel_name, settings.max_steps) == ("m", "k", 3)
    assert settings.cell_timeout == 5 and [f.name for f in settings.files] == ["a.csv"]


def test_the_magic_refuses_every_kernel_flag_and_takes_the_others() -> None:
    from kernel_agent.frontends.magics import _parse, build_parser

    for flag in option_flags("kernel").values():
        value = {"--keep-kernel": [], "--sandbox": ["none"]}.get(flag, ["x"])
        with pytest.raises(ConfigError, match=f"{flag} does not apply to %agent"):
            _parse(build_parser("%agent", task=True), shlex.join([flag, *value, "task"]))
    args = _parse(build_parser("%agent", task=True), "--max-steps 2 --cell-timeout 9 do it")
    assert (args.max_steps, args.cell_timeout) == (2, 9)
