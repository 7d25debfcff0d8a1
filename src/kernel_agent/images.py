"""Cell images made small enough to hand to a model: downscaled, re-encoded, bounded.

Pure functions over base64 strings (Pillow does the pixels). The transcript keeps the
original images; these are only what a front end sends back to an outside model.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

__all__ = [
    "IMAGE_EXTENSIONS",
    "IMAGE_MIMES",
    "RASTER_MIMES",
    "BoundedImage",
    "bound_image",
    "from_data_url",
]

#: Image types stored as base64 pixels, that a model with vision can be shown.
RASTER_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: Every image type a cell's output bundle may hold (SVG is text), in order of preference.
IMAGE_MIMES = (*RASTER_MIMES, "image/svg+xml")
#: The file extension each image type is saved with.
IMAGE_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/svg+xml": "svg",
}

#: Longest side in pixels, and the most bytes one image may take once encoded.
MAX_SIDE = 1024
MAX_BYTES = 512 * 1024


@dataclass(frozen=True)
class BoundedImage:
    """One image ready for a model: ``data`` is base64, ``mime`` its type."""

    mime: str
    data: str
    width: int
    height: int
    scaled: bool


def from_data_url(url: str) -> tuple[str, str] | None:
    """``data:image/png;base64,XXXX`` -> ("image/png", "XXXX"); None for anything else."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def bound_image(
    mime: str, data: str, *, max_side: int = MAX_SIDE, max_bytes: int = MAX_BYTES
) -> BoundedImage | None:
    """``data`` (base64 ``mime``) scaled to fit ``max_side`` and ``max_bytes``.

    An image already within both bounds is returned as it is. A larger one is
    downscaled (aspect kept) and re-encoded as PNG, or JPEG when PNG stays too big;
    None when it cannot be decoded or cannot be brought under ``max_bytes``.
    """
    try:
        raw = base64.b64decode(data, validate=False)
    except (ValueError, TypeError):
        return None
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as img:
            img.load()
            width, height = img.size
            if max(width, height) <= max_side and len(raw) <= max_bytes and mime in RASTER_MIMES:
                return BoundedImage(mime, data, width, height, scaled=False)
            picture = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None
    side = max_side
    while side >= 64:
        copy = picture.copy()
        copy.thumbnail((side, side))
        for fmt, out_mime in (("PNG", "image/png"), ("JPEG", "image/jpeg")):
            buf = io.BytesIO()
            frame = copy if fmt == "PNG" else copy.convert("RGB")
            frame.save(buf, format=fmt, optimize=True, **({"quality": 80} if fmt == "JPEG" else {}))
            if buf.tell() <= max_bytes:
                encoded = base64.b64encode(buf.getvalue()).decode("ascii")
                return BoundedImage(out_mime, encoded, copy.width, copy.height, scaled=True)
        side //= 2
    return None
