"""Places that run code: local kernels, gateway kernels, the current IPython shell."""

from .base import AsyncExecutor

__all__ = ["AsyncExecutor"]
