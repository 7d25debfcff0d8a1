"""Do two lists of cell outputs say the same thing? Pure functions, no kernel.

Used by :mod:`kernel_agent.notebook.verify` to compare a cell's stored outputs with the
outputs of re-executing it. What is *not* a difference:

- memory addresses (``0x7f3a...``), UUIDs and long random hex ids, timestamps
  with a time of day, durations (``1.2 ms``, ``3 s``, ``%timeit`` loop counts),
  ANSI escapes, the cell names in tracebacks (``Cell In[7]``,
  ``/tmp/ipykernel_123/456.py``), SVG ids and dates;
- how a stream was chunked: each stream (stdout, stderr) is compared as the
  concatenation of its text with ``\\r``/``\\b`` resolved, and streams are
  compared apart from the rich outputs, so the interleaving of stdout, stderr
  and displays (asynchronous in Jupyter) does not matter;
- output metadata and execution counts;
- a stored stream cut by kernel-agent's output bound matches when the new text
  starts with the kept head and ends with the kept tail.

Images (png, jpeg, gif, webp) are compared by decoded pixels within an
:class:`ImageTolerance`; a size mismatch is always a difference.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..edges.escapes import visible
from ..edges.images import RASTER_MIMES, image_size, open_image
from ..errors import ImageTooLarge, one_line
from ..results import strip_ansi
from .outputs import resolve_control_chars

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = [
    "ImageTolerance",
    "ImageComparison",
    "CellComparison",
    "normalize_text",
    "compare_images",
    "compare_outputs",
    "render_outputs",
]

#: One output of a cell: an nbformat NotebookNode, or a plain dict of the same shape.
Output = Mapping[str, Any]
#: An image as a bundle holds it (base64 text, maybe split in lines) or as raw bytes.
ImageData = str | list[str] | bytes

_SUBSTITUTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"Cell In\s?\[\s*\d*\s*\]"), "Cell In[N]"),
    (re.compile(r"Input In \[\s*\d*\s*\]"), "Input In [N]"),
    (re.compile(r"<ipython-input-\d+-[0-9a-f]+>"), "<ipython-input>"),
    # tried only where a token starts: from every position it was quadratic in a long token
    (re.compile(r"(?:(?<=[\s'\"(])|^)[^\s'\"(]*ipykernel_\d+[/\\]\d+\.py", re.M), "<cell>"),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
        ),
        "<timestamp>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b[\d,]+ loops? each\b"), "N loops each"),
    (
        re.compile(
            r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?"
            r"(?:ns|µs|μs|us|ms|s|secs?|seconds?|mins?|minutes?)\b"
        ),
        "<duration>",
    ),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x..."),
    (re.compile(r"\bT_[0-9a-f]{5}\b"), "T_<id>"),  # pandas Styler table ids
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b"), "<hex>"),
]
_SVG_IDS = re.compile(r"(\bid=\"|url\(#|href=\"#)[^\")]+")
_SVG_DATE = re.compile(r"<dc:date>.*?</dc:date>", re.S)
_STRIP_ROWS = 512
_TRUNCATED = re.compile(r"\n\[kernel-agent: output truncated, [\d,]+ characters omitted\]\n")


def normalize_text(text: str) -> str:
    """``text`` with run-to-run noise replaced by placeholders (see module doc)."""
    text = strip_ansi(text)
    for pattern, replacement in _SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    return text


def _normalize_svg(text: str) -> str:
    return normalize_text(_SVG_IDS.sub(r"\1<id>", _SVG_DATE.sub("", text)))


# ------------------------------------------------------------------ images
@dataclass(frozen=True)
class ImageTolerance:
    """How different two images may be and still count as the same.

    A pixel differs when one of its channels (RGB, after compositing any alpha
    onto white) differs by more than ``pixel_threshold`` (0-255). Images match
    when at most ``fraction`` of their pixels differ **and** the mean absolute
    channel difference is at most ``mean`` (0-255). ``ImageTolerance.exact()``
    allows no difference at all.
    """

    fraction: float = 0.01
    mean: float = 2.0
    pixel_threshold: int = 16

    def __post_init__(self) -> None:
        if not 0 <= self.fraction <= 1:
            raise ValueError(f"image tolerance fraction must be in [0, 1], got {self.fraction}")
        if self.mean < 0 or self.pixel_threshold < 0:
            raise ValueError("image tolerance mean and pixel threshold must be >= 0")

    @classmethod
    def exact(cls) -> ImageTolerance:
        return cls(fraction=0.0, mean=0.0, pixel_threshold=0)


@dataclass(frozen=True)
class ImageComparison:
    same: bool
    reason: str
    size: tuple[int, int] | None = None
    other_size: tuple[int, int] | None = None
    mean: float = 0.0
    fraction: float = 0.0


def _raw(data: ImageData) -> bytes:
    return data if isinstance(data, bytes) else base64.b64decode("".join(str(data).split()))


def _decode_image(data: ImageData) -> PILImage:
    """The image as RGB, any alpha composited onto white; bounded by ``images.MAX_PIXELS``."""
    from PIL import Image

    image = open_image(_raw(data))
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def compare_images(
    stored: ImageData, fresh: ImageData, tolerance: ImageTolerance | None = None
) -> ImageComparison:
    """Compare two images (base64 text or bytes) by decoded pixels.

    The same bytes are the same image, decoded or not. An image past the host's pixel
    bound (:data:`kernel_agent.edges.images.MAX_PIXELS`) is not decoded: "image too large".
    Nothing an image holds makes this raise.
    """
    import numpy as np

    tolerance = tolerance or ImageTolerance()
    try:
        a_raw, b_raw = _raw(stored), _raw(fresh)
    except (ValueError, binascii.Error) as exc:
        return ImageComparison(False, f"cannot decode image: {exc}")
    if a_raw == b_raw:
        return ImageComparison(True, "the same bytes")
    try:
        a, b = _decode_image(a_raw), _decode_image(b_raw)
    except ImageTooLarge as exc:
        return ImageComparison(False, str(exc))
    except Exception as exc:  # a kernel's bytes: whatever Pillow raises is a difference
        return ImageComparison(False, f"cannot decode image: {one_line(str(exc), 200)}")
    if a.size != b.size:
        return ImageComparison(
            False, f"size {a.size[0]}x{a.size[1]} became {b.size[0]}x{b.size[1]}", a.size, b.size
        )
    width, height = a.size
    total = 0.0
    differing = 0
    for top in range(0, height, _STRIP_ROWS):  # a strip at a time: memory stays flat
        box = (0, top, width, min(top + _STRIP_ROWS, height))
        diff = np.abs(
            np.asarray(a.crop(box), dtype=np.int16) - np.asarray(b.crop(box), dtype=np.int16)
        )
        total += float(diff.sum())
        differing += int((diff.max(axis=2) > tolerance.pixel_threshold).sum())
    pixels = max(width * height, 1)
    mean = total / (pixels * 3)
    fraction = differing / pixels
    same = fraction <= tolerance.fraction and mean <= tolerance.mean
    reason = (
        f"{fraction:.2%} of pixels differ, mean difference {mean:.2f}/255 "
        f"(tolerance {tolerance.fraction:.2%}, {tolerance.mean:g})"
    )
    return ImageComparison(same, reason, a.size, b.size, mean, fraction)


# ----------------------------------------------------------------- outputs
@dataclass
class CellComparison:
    """The outcome of comparing one cell: ``same``, and if not, why and a short diff."""

    same: bool
    problems: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)


def _streams_and_rich(outputs: Iterable[Output]) -> tuple[dict[str, str], list[Output]]:
    streams: dict[str, str] = {}
    rich: list[Output] = []
    for out in outputs:
        if out.get("output_type") == "stream":
            name = out.get("name", "stdout")
            streams[name] = streams.get(name, "") + _text(out.get("text", ""))
        else:
            rich.append(out)
    return {k: resolve_control_chars(v) for k, v in streams.items()}, rich


def _text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _same_stream(stored: str, fresh: str) -> bool:
    stored, fresh = normalize_text(stored), normalize_text(fresh)
    if stored == fresh:
        return True
    parts = _TRUNCATED.split(stored)
    if len(parts) == 2:  # stored text was cut by kernel-agent's output bound
        head, tail = parts
        return fresh.startswith(head) and fresh.endswith(tail) and len(fresh) > len(stored) - 80
    return False


def _mime_text(mime: str, value: object) -> str:
    if mime == "image/svg+xml":
        return _normalize_svg(_text(value))
    if isinstance(value, (dict, list)) and not mime.startswith("text/"):
        return normalize_text(json.dumps(value, sort_keys=True, indent=1))
    return normalize_text(_text(value))


def _compare_rich(
    number: int, stored: Output, fresh: Output, tolerance: ImageTolerance
) -> list[str]:
    where = f"output {number}"
    kind, other = stored.get("output_type"), fresh.get("output_type")
    if kind != other:
        return [f"{where}: {kind} became {other}"]
    if kind == "error":
        problems = []
        if (stored.get("ename"), normalize_text(stored.get("evalue", ""))) != (
            fresh.get("ename"),
            normalize_text(fresh.get("evalue", "")),
        ):
            problems.append(
                f"{where}: error {stored.get('ename')}: {one_line(stored.get('evalue', ''), 80)} "
                f"became {fresh.get('ename')}: {one_line(fresh.get('evalue', ''), 80)}"
            )
        elif _traceback(stored) != _traceback(fresh):
            problems.append(f"{where}: the traceback of {stored.get('ename')} differs")
        return problems
    data, new = stored.get("data", {}), fresh.get("data", {})
    problems = []
    if set(data) != set(new):
        gone, came = sorted(set(data) - set(new)), sorted(set(new) - set(data))
        problems.append(
            f"{where}: MIME types differ"
            + (f"; missing {', '.join(gone)}" if gone else "")
            + (f"; new {', '.join(came)}" if came else "")
        )
    for mime in sorted(set(data) & set(new)):
        if mime in RASTER_MIMES:
            result = compare_images(data[mime], new[mime], tolerance)
            if not result.same:
                problems.append(f"{where}: {mime} {result.reason}")
        elif _mime_text(mime, data[mime]) != _mime_text(mime, new[mime]):
            problems.append(f"{where}: {mime} differs")
    return problems


def _traceback(out: Output) -> str:
    return normalize_text("\n".join(_text(line) for line in out.get("traceback", [])))


def compare_outputs(
    stored: Iterable[Output], fresh: Iterable[Output], tolerance: ImageTolerance | None = None
) -> CellComparison:
    """Compare a cell's stored outputs with its re-executed ones."""
    tolerance = tolerance or ImageTolerance()
    stored, fresh = list(stored), list(fresh)
    old_streams, old_rich = _streams_and_rich(stored)
    new_streams, new_rich = _streams_and_rich(fresh)
    problems: list[str] = []
    for name in sorted(set(old_streams) | set(new_streams)):
        if not _same_stream(old_streams.get(name, ""), new_streams.get(name, "")):
            problems.append(f"{name} differs")
    if len(old_rich) != len(new_rich):
        problems.append(f"{len(old_rich)} rich outputs stored, {len(new_rich)} after re-execution")
    for number, (a, b) in enumerate(zip(old_rich, new_rich, strict=False), start=1):
        problems.extend(_compare_rich(number, a, b, tolerance))
    if not problems:
        return CellComparison(True)
    # the report is shown in terminals and stored: no escape, bidi or zero-width char raw
    return CellComparison(
        False, [visible(p) for p in problems], [visible(line) for line in short_diff(stored, fresh)]
    )


# ----------------------------------------------------------------- diffing
def render_outputs(outputs: Iterable[Output]) -> list[str]:
    """Normalised text lines standing for ``outputs``, for a human-readable diff."""
    streams, rich = _streams_and_rich(outputs)
    lines: list[str] = []
    for name in sorted(streams):
        lines.append(f"[{name}]")
        lines.extend(normalize_text(streams[name]).splitlines())
    for out in rich:
        kind = out.get("output_type")
        if kind == "error":
            lines.append(f"[error] {out.get('ename')}: {normalize_text(out.get('evalue', ''))}")
            continue
        for mime, value in sorted(out.get("data", {}).items()):
            if mime in RASTER_MIMES:
                lines.append(f"[{kind} {mime} {_image_size(value)}]")
            else:
                lines.append(f"[{kind} {mime}]")
                lines.extend(_mime_text(mime, value).splitlines()[:40])
    return lines


def _image_size(value: ImageData) -> str:
    try:
        width, height = image_size(_raw(value))  # from the header: no pixel decoded
    except ImageTooLarge:
        return "too large"
    except Exception:
        return "undecodable"
    return f"{width}x{height}"


def short_diff(stored: Iterable[Output], fresh: Iterable[Output], limit: int = 24) -> list[str]:
    """A unified diff of :func:`render_outputs`, at most ``limit`` lines."""
    lines = list(
        difflib.unified_diff(
            render_outputs(stored), render_outputs(fresh), "stored", "re-executed", n=1, lineterm=""
        )
    )
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more diff lines)"]
    return lines
