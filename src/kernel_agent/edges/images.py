"""Cell images made small enough to hand to a model: downscaled, re-encoded, bounded.

Pure functions over base64 strings (Pillow does the pixels). The transcript keeps the
original images; these are only what a front end sends back to an outside model.

An image is a kernel's bytes: a 14000x13000 PNG can be 700 KB and decode to 550 MB.
:func:`open_image` is the one way the host decodes one: it reads the size from the
header and refuses past :data:`MAX_PIXELS` (:class:`ImageTooLarge`) before any pixel is
decoded, and lets no Pillow exception or warning out but as ``ValueError``/``OSError``.
Pillow's own process-wide ``Image.MAX_IMAGE_PIXELS`` is left alone: kernel-agent also
runs inside a user's kernel (``%%agent``), whose images are none of its business.

When kernel-agent runs as root, the host decodes a kernel's images only in the
unprivileged worker of :mod:`kernel_agent.notebook.worker` (verify's comparison, the
images a session sends a model): a decoder bug there runs as a uid that owns nothing.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ImageTooLarge

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = [
    "IMAGE_EXTENSIONS",
    "IMAGE_MIMES",
    "RASTER_MIMES",
    "BoundedImage",
    "MAX_PIXELS",
    "bound_image",
    "from_data_url",
    "image_size",
    "open_image",
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
#: The most pixels the host decodes in one image (40 Mpx: 160 MB as RGBA).
MAX_PIXELS = 40_000_000


def image_size(raw: bytes) -> tuple[int, int]:
    """(width, height) from the image's header, no pixel decoded; ValueError/OSError."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw)) as img:
                return img.size
    except Image.DecompressionBombError:  # past Pillow's own bound: twice MAX_IMAGE_PIXELS
        limit = 2 * (Image.MAX_IMAGE_PIXELS or 0)
        raise ImageTooLarge(f"image too large: over {limit:,} pixels") from None
    except (OSError, ValueError):
        raise
    except Exception as exc:  # a broken file may raise anything out of a decoder
        raise ValueError(f"cannot read the image: {type(exc).__name__}: {exc}") from None


def open_image(raw: bytes, max_pixels: int = MAX_PIXELS) -> PILImage:
    """The decoded image in ``raw``; :class:`ImageTooLarge` past ``max_pixels``.

    The size is checked from the header before anything is decoded. Any other
    failure is ``OSError`` or ``ValueError``.
    """
    from PIL import Image

    width, height = image_size(raw)
    if width * height > max_pixels:
        raise ImageTooLarge(
            f"image too large: {width}x{height} pixels, over the {max_pixels:,} pixel bound"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(raw))
            img.load()
    except (OSError, ValueError):
        raise
    except Exception as exc:
        raise ValueError(f"cannot decode the image: {type(exc).__name__}: {exc}") from None
    return img


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
    try:
        with open_image(raw) as img:
            width, height = img.size
            if max(width, height) <= max_side and len(raw) <= max_bytes and mime in RASTER_MIMES:
                return BoundedImage(mime, data, width, height, scaled=False)
            picture = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
    except Exception:  # too large, or not an image: nothing to show the model
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
