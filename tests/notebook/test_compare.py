"""compare.py: output normalisation and pixel comparison (pure units, no kernel)."""

from __future__ import annotations

import base64
import io

import pytest
from nbformat.v4 import new_output

from kernel_agent.notebook.compare import (
    ImageTolerance,
    compare_images,
    compare_outputs,
    normalize_text,
    short_diff,
)


def _png(size=(40, 30), colour=(255, 0, 255), box=None, box_colour=(0, 0, 0)):
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, colour)
    if box:
        ImageDraw.Draw(image).rectangle(box, fill=box_colour)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _display(png):
    return new_output("display_data", data={"image/png": png, "text/plain": "<Figure size 40x30>"})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("<object object at 0x7f3a2b1c0d90>", "<object object at 0x55d0c0ffee00>"),
        ("id 1b4e28ba-2fa1-11d2-883f-0016d3cca427", "id 6fa459ea-ee8a-3ca4-894e-db77e160355e"),
        ("at 2025-01-02T03:04:05.123456+00:00", "at 2026-11-21 23:59:01"),
        ("took 1.23 ms", "took 7 s"),
        (
            "12.3 µs ± 1.1 µs per loop (mean ± std. dev. of 7 runs, 100,000 loops each)",
            "9.8 µs ± 0.4 µs per loop (mean ± std. dev. of 7 runs, 10,000 loops each)",
        ),
        ("Cell In[3], line 1", "Cell In[17], line 1"),
        ("File /tmp/ipykernel_123/2945.py:1", "File /tmp/ipykernel_98/11.py:1"),
        ("\x1b[31mValueError\x1b[0m", "ValueError"),
        ("key 9f86d081884c7d659a2feaa0c55ad015", "key 2c26b46b68ffc68ff99b453c1d304134"),
    ],
)
def test_run_to_run_noise_is_normalised(a, b):
    assert normalize_text(a) == normalize_text(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("<Foo object at 0x7f3a2b1c0d90>", "<Bar object at 0x7f3a2b1c0d90>"),
        ("30", "31"),
        ("Cell In[3], line 1", "Cell In[3], line 2"),
        ("mean 3.25", "mean 3.5"),
    ],
)
def test_real_differences_survive_normalisation(a, b):
    assert normalize_text(a) != normalize_text(b)


def test_streams_compare_as_text_whatever_the_chunking():
    stored = [
        new_output("stream", name="stdout", text="a\nb\n"),
        new_output("execute_result", data={"text/plain": "1"}, execution_count=3),
    ]
    fresh = [
        new_output("stream", name="stdout", text="a\n"),
        new_output("execute_result", data={"text/plain": "1"}, execution_count=1),
        new_output("stream", name="stdout", text="b\n"),
    ]
    assert compare_outputs(stored, fresh).same
    fresh[-1]["text"] = "c\n"
    result = compare_outputs(stored, fresh)
    assert not result.same and result.problems == ["stdout differs"]
    assert "-b" in result.diff and "+c" in result.diff


def test_progress_bars_resolve_carriage_returns():
    stored = [new_output("stream", name="stderr", text="100%\n")]
    fresh = [
        new_output("stream", name="stderr", text="10%\r50%\r"),
        new_output("stream", name="stderr", text="100%\n"),
    ]
    assert compare_outputs(stored, fresh).same


def test_truncated_stored_stream_matches_its_head_and_tail():
    stored = [
        new_output(
            "stream",
            name="stdout",
            text="head\n[kernel-agent: output truncated, 1,000 characters omitted]\ntail\n",
        )
    ]
    fresh = [new_output("stream", name="stdout", text="head\n" + "x" * 1000 + "\ntail\n")]
    assert compare_outputs(stored, fresh).same
    fresh = [new_output("stream", name="stdout", text="head\n" + "x" * 1000 + "\nTAIL\n")]
    assert not compare_outputs(stored, fresh).same


def test_errors_compare_name_value_and_traceback_without_cell_numbers():
    def err(value, where="Cell In[4], line 1"):
        return [
            new_output(
                "error",
                ename="NameError",
                evalue=value,
                traceback=[f"\x1b[31m{where}\x1b[0m", "NameError: " + value],
            )
        ]

    assert compare_outputs(
        err("name 'x' is not defined"), err("name 'x' is not defined", "Cell In[1], line 1")
    ).same
    result = compare_outputs(err("name 'x' is not defined"), err("name 'y' is not defined"))
    assert not result.same and "NameError" in result.problems[0]
    assert not compare_outputs(err("v"), err("v", "Cell In[4], line 2")).same


def test_output_count_and_mime_changes_are_reported():
    one = [new_output("display_data", data={"text/plain": "x"})]
    two = [new_output("display_data", data={"text/plain": "x", "text/html": "<b>x</b>"})]
    result = compare_outputs(one, two)
    assert result.problems == ["output 1: MIME types differ; new text/html"]
    result = compare_outputs(one, [])
    assert result.problems == ["1 rich outputs stored, 0 after re-execution"]


def test_images_compare_by_pixels_within_tolerance():
    base = _png(size=(100, 100))
    speck = _png(size=(100, 100), box=(0, 0, 4, 4))  # 25 pixels = 0.25%
    blotch = _png(size=(100, 100), box=(0, 0, 29, 29))  # 900 pixels = 9%
    assert compare_images(base, base, ImageTolerance.exact()).same
    assert compare_images(base, speck).same
    assert not compare_images(base, speck, ImageTolerance.exact()).same
    result = compare_images(base, blotch)
    assert not result.same and result.fraction == pytest.approx(0.09)
    assert "9.00% of pixels differ" in result.reason
    assert compare_images(base, blotch, ImageTolerance(fraction=0.1, mean=100)).same


def test_image_size_mismatch_always_differs():
    result = compare_images(
        _png(size=(40, 30)), _png(size=(40, 31)), ImageTolerance(fraction=1, mean=255)
    )
    assert not result.same and result.reason == "size 40x30 became 40x31"
    assert "-[display_data image/png 40x30]" in short_diff([_display(_png())], [])


def test_images_inside_outputs_use_the_tolerance():
    stored, fresh = (
        [_display(_png(size=(100, 100)))],
        [_display(_png(size=(100, 100), box=(0, 0, 4, 4)))],
    )
    assert compare_outputs(stored, fresh).same
    result = compare_outputs(stored, fresh, ImageTolerance.exact())
    assert not result.same and result.problems[0].startswith(
        "output 1: image/png 0.25% of pixels differ"
    )


def test_undecodable_image_differs():
    assert not compare_images("not base64!", _png()).same


def test_tolerance_is_validated():
    with pytest.raises(ValueError):
        ImageTolerance(fraction=1.5)


def test_normalising_a_long_token_is_linear() -> None:
    # a kept output can be 1 M characters with no blank in it (an evalue, a minified JSON):
    # the ipykernel-path pattern was tried from every position of it (hours for 250 K)
    import time

    from kernel_agent.notebook.compare import normalize_text

    started = time.monotonic()
    for text in ("v" * 250_000, "a1" * 125_000, "/x" * 125_000 + "ipykernel_1/2.py"):
        normalize_text(text)
    assert time.monotonic() - started < 3
    assert normalize_text("at /tmp/ipykernel_12/34.py, (ipykernel_5/6.py") == "at <cell>, (<cell>"
