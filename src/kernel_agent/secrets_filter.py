"""Keep the model's key and other secrets out of the kernel's environment."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["SECRET_MARKERS", "is_secret_name", "kernel_environment"]

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def is_secret_name(name: str) -> bool:
    """True for variable names that look like they hold a credential."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def kernel_environment(
    base: Mapping[str, str] | None = None, passthrough: Iterable[str] = ()
) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without secret-looking variables.

    Names in ``passthrough`` are kept even when they look secret: the caller asked.
    """
    base = os.environ if base is None else base
    keep = set(passthrough)
    return {k: v for k, v in base.items() if k in keep or not is_secret_name(k)}
