"""The kernel's environment: a short allowlist, never the agent's environment minus a denylist.

A denylist of secret-looking names misses ``GITHUB_PAT``, ``DATABASE_URL`` with a
password in it, proxy and index URLs with credentials, ``SENTRY_DSN``... So the
kernel gets only what a data-analysis kernel needs to run the same as outside
(``PATH``, locale, time zone, thread counts of the numeric libraries, matplotlib's
backend) plus the names the user passes through explicitly (``env_passthrough``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = [
    "ALLOWED_NAMES",
    "ALLOWED_PREFIXES",
    "SECRET_MARKERS",
    "is_secret_name",
    "kernel_environment",
]

#: variables a kernel gets from the agent's environment, by exact name
ALLOWED_NAMES = frozenset(
    {
        "PATH", "LANG", "LANGUAGE", "TZ", "HOME", "USER", "LOGNAME",
        "MPLBACKEND", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONHASHSEED",
        "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
        "COLUMNS", "LINES", "NO_COLOR", "SOURCE_DATE_EPOCH",
    }
)  # fmt: skip
#: ... and by prefix: the locale, and the thread pools of the numeric libraries
ALLOWED_PREFIXES = ("LC_", "OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_", "GOTO_", "KMP_", "BLIS_")

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PWD", "PAT", "CREDENTIAL",
                  "DSN", "COOKIE", "WEBHOOK", "AUTH")  # fmt: skip


def is_secret_name(name: str) -> bool:
    """True for names that look like they hold a credential (used for warnings only)."""
    upper = name.upper()
    return any(marker in upper.split("_") or marker in upper for marker in SECRET_MARKERS)


def _allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def kernel_environment(
    base: Mapping[str, str] | None = None, passthrough: Iterable[str] = ()
) -> dict[str, str]:
    """The allowlisted part of ``base`` (default ``os.environ``), plus ``passthrough``.

    A name in ``passthrough`` is given to the kernel whatever it holds: the caller asked.
    """
    base = os.environ if base is None else base
    keep = set(passthrough)
    return {k: v for k, v in base.items() if k in keep or _allowed(k)}
