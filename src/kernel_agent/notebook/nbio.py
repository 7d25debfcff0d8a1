"""Reading notebooks given by a user, with one-line errors.

:func:`read_notebook` turns every way a path can fail to be a notebook (missing,
a directory, unreadable, not JSON, JSON that is not a notebook, a notebook that
fails the nbformat schema) into a :class:`~kernel_agent.errors.NotebookError`
whose message fits on one line.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from ..errors import NotebookError, one_line

__all__ = ["read_notebook", "parse_notebook", "validate_notebook"]


def read_notebook(path: str | Path) -> NotebookNode:
    """Read and validate a v4 notebook (older versions are upgraded)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise NotebookError(f"cannot read notebook {path}: it is a directory") from None
    except UnicodeDecodeError:
        raise NotebookError(f"{path} is not a Jupyter notebook (not UTF-8 text)") from None
    except OSError as exc:
        raise NotebookError(f"cannot read notebook {path}: {exc.strerror or exc}") from None
    return parse_notebook(text, path)


def parse_notebook(text: str, path: str | Path = "notebook") -> NotebookNode:
    """A notebook from its JSON text, validated (as :func:`read_notebook`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            nb = nbformat.reads(text, as_version=4)
        except nbformat.reader.NotJSONError:
            raise NotebookError(f"{path} is not a Jupyter notebook (not JSON)") from None
        except Exception as exc:  # nbformat raises many types for JSON that is not a notebook
            raise NotebookError(f"{path} is not a valid notebook: {one_line(exc)}") from None
    if not isinstance(nb, NotebookNode) or "cells" not in nb:
        raise NotebookError(f"{path} is not a Jupyter notebook (no cells)")
    validate_notebook(nb, path)
    return nb


def validate_notebook(nb: NotebookNode, path: str | Path = "notebook") -> None:
    """Raise :class:`NotebookError` unless ``nb`` is valid nbformat v4."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as exc:
            raise NotebookError(f"invalid notebook {path}: {one_line(exc.message)}") from None
        except Exception as exc:
            raise NotebookError(f"invalid notebook {path}: {one_line(exc)}") from None
