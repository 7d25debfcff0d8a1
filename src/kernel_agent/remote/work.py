"""A remote kernel's own work dir: inputs go in at start, the kernel's files come back.

:class:`RemoteWork` is what a gateway session holds (``AsyncGatewaySession.files``):

- after every (re)start, :meth:`RemoteWork.ready` makes the kernel a private work dir
  (found again after a restart), runs it there, and uploads the inputs that are not
  there already (``--file``, and the top-level data files of an explicit ``--cwd``);
- after a run, :meth:`RemoteWork.deliver` lists the kernel's work dir, pulls its files
  into a private staging dir on this host and hands that to local delivery
  (:func:`kernel_agent.edges.delivery.deliver`): one archive ``<notebook>_files/work.zip``,
  and ``set_result``'s inert data files loose in ``<notebook>_files/result/``. The remote
  side is treated as hostile exactly like a local sandbox: links, dot names at any depth,
  non-regular files, setuid bits and absurd names are refused with notes; count, per-file
  and total bytes are bounded.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..edges.archive import members_of
from ..edges.delivery import ARCHIVE, Delivery, DeliveryLimits, deliver
from ..edges.safefs import open_beneath, remove_beneath, write_stream_beneath
from ..errors import ConfigError, GatewayError, KernelAgentError, UnsafePath
from ..executors.base import AsyncExecutor
from ..settings import Settings
from .names import check_name
from .transfer import KernelFiles, RemoteEntry, TransferLimits

__all__ = ["RemoteInput", "RemoteWork", "inputs_from_settings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteInput:
    path: Path  # on this host (the user's file)
    name: str  # in the kernel's work dir


def inputs_from_settings(
    settings: Settings, limits: DeliveryLimits | None = None
) -> tuple[list[RemoteInput], list[str]]:
    """The files a remote kernel gets at start, and notes on what was left out.

    ``--file`` always (a missing one, or one over ``limits``, is a :class:`ConfigError`). The
    ``--cwd`` view only when ``--cwd`` was given: its top-level regular files, not
    links and not dot files, within ``limits`` (a remote kernel is another machine:
    nothing of the current directory leaves this host unless asked).
    """
    limits = limits or DeliveryLimits()
    chosen: dict[str, RemoteInput] = {}
    notes: list[str] = []
    total = 0
    for file in settings.files:
        path = Path(file).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"no such file: {path}")
        size = path.stat().st_size
        if size > limits.max_file_bytes or total + size > limits.max_total_bytes:
            raise ConfigError(
                f"--file {path} is {size} bytes: a remote kernel is sent at most "
                f"{limits.max_file_bytes} bytes a file and {limits.max_total_bytes} in all"
            )
        total += size
        chosen[path.name] = RemoteInput(path, path.name)
    if len(chosen) > limits.max_files:
        raise ConfigError(f"at most {limits.max_files} --file files for a remote kernel")
    if settings.cwd is not None:
        from ..sandbox.room import check_view_dir

        view = Path(settings.cwd).expanduser().resolve()
        why = check_view_dir(view)
        if why:
            raise ConfigError(f"refusing to send the files of {view} to a remote kernel: {why}")
        try:
            names = sorted(os.listdir(view))
        except OSError as exc:
            raise ConfigError(f"cannot read {view}: {exc.strerror}") from None
        for name in names:
            if name in chosen or name.startswith("."):
                continue
            path = view / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if len(chosen) >= limits.max_files:
                notes.append(f"more than {limits.max_files} files in {view}")
                break
            if st.st_size > limits.max_file_bytes or total + st.st_size > limits.max_total_bytes:
                notes.append(f"{name} ({st.st_size} bytes) is over the size bound")
                continue
            chosen[name] = RemoteInput(path, name)
            total += st.st_size
    return list(chosen.values()), notes


@dataclass
class RemoteWork:
    """The work dir of one remote kernel, reached through ``executor``'s own channels."""

    executor: AsyncExecutor
    inputs: list[RemoteInput] = field(default_factory=list)
    limits: DeliveryLimits = field(default_factory=DeliveryLimits)
    transfer: TransferLimits = field(default_factory=TransferLimits)
    #: notes on inputs left out (said once, at start)
    notes: list[str] = field(default_factory=list)
    #: the kernel's work dir on its own machine (None until ready)
    work: str | None = None
    #: name -> (size, sha256) of the inputs as uploaded
    uploaded: dict[str, tuple[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        #: the transfer's host end (calls the kernel-side half through ``executor``)
        self.kernel = KernelFiles(self.executor, self.transfer)

    @property
    def _max_entries(self) -> int:
        return self.limits.max_files * 10  # as local delivery

    async def ready(self) -> None:
        """After a (re)start: the private work dir, and the inputs not there already."""
        if self.executor.language_info.get("name") != "python":
            if self.inputs:
                log.warning("input files reach Python kernels only; this one is not")
            return
        for note in self.notes:
            log.warning("not sent to the remote kernel: %s", note)
        self.notes = []
        kernel = self.kernel
        self.work = await kernel.setup(self.work)
        for item in self.inputs:
            known = self.uploaded.get(item.name)
            if known is not None and await kernel.digest(item.name) == known:
                continue
            try:
                self.uploaded[item.name] = await kernel.upload(item.path, item.name)
            except OSError as exc:
                raise GatewayError(f"cannot send {item.path}: {exc.strerror}") from None
        if self.inputs:
            log.info("sent %d file(s) to the kernel's %s", len(self.inputs), self.work)

    # ---------------------------------------------------------------- delivery
    async def deliver(self, notebook: Path, declared: Sequence[str] = ()) -> Delivery:
        """Pull the kernel's own files into a private staging dir on this host, then bring
        them beside ``notebook`` as local delivery does (:func:`~kernel_agent.edges.delivery.
        deliver`: one archive, ``declared``'s inert data files loose)."""
        notes: list[str] = []
        dots: list[str] = []
        deep: list[str] = []
        pulled = total = 0
        entries = await self.kernel.listing(self._max_entries, self.limits.max_depth)
        with contextlib.ExitStack() as stack:
            earlier = _earlier_archive(notebook, stack)
            stage = stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-agent-pull-"))
            for entry in entries:
                if _hidden(entry.path):  # the dot rule, as local delivery
                    dots.append(entry.path)
                    continue
                if entry.kind == "dir":
                    if entry.path.count("/") + 1 >= self.limits.max_depth:
                        deep.append(entry.path)
                    continue
                if pulled >= self.limits.max_files:
                    notes.insert(0, f"more than {self.limits.max_files} files")
                    break
                why = self._refusal(entry, total)
                if why is not None:
                    notes.append(why)
                    continue
                try:
                    if entry.path not in declared and await self._input(entry):
                        continue  # an input sent at start: the user's own file
                    if earlier is None or not await self._reuse(entry, earlier, stage):
                        await self.kernel.download(entry.path, stage, entry.path,
                                                   size=entry.size)  # fmt: skip
                    total += entry.size
                except (OSError, KernelAgentError) as exc:
                    notes.append(f"{entry.path!r:.80}: {exc}")
                    continue
                pulled += 1
            found = deliver(Path(stage), notebook, declared=declared, limits=self.limits)
        group = []
        if dots:
            group.append(
                f"{len(dots)} dot-named path(s), hidden state rather than results: " + _some(dots)
            )
        if deep:
            group.append(f"what is below {self.limits.max_depth} directory levels: {_some(deep)}")
        if len(entries) >= self._max_entries:
            group.append(f"everything past the first {self._max_entries} entries")
        found.notes = group + notes + found.notes
        return found

    async def _reuse(self, entry: RemoteEntry, earlier: zipfile.ZipFile, stage: str) -> bool:
        """Stage ``entry`` from the archive an earlier delivery wrote, when that holds the same
        bytes as the kernel's file (size and sha256): no transfer for an unchanged file."""
        info = next((i for i in members_of(earlier) if i.filename == entry.path), None)
        if info is None or info.file_size != entry.size:
            return False
        digest = hashlib.sha256()
        try:
            with earlier.open(info) as src, write_stream_beneath(stage, entry.path) as dst:
                while block := src.read(1 << 20):
                    digest.update(block)
                    dst.write(block)
        except (OSError, UnsafePath, zipfile.BadZipFile, ValueError):
            return False  # not readable as it was written: pulled again
        if await self.kernel.digest(entry.path) == (entry.size, digest.hexdigest()):
            return True
        remove_beneath(stage, entry.path)  # changed since: never archive the old bytes
        return False

    async def _input(self, entry: RemoteEntry) -> bool:
        """True when ``entry`` is an input as it was sent at start."""
        known = self.uploaded.get(entry.path)
        if known is None or known[0] != entry.size:
            return False
        return await self.kernel.digest(entry.path) == known

    def _refusal(self, entry: RemoteEntry, total: int, max_bytes: int | None = None) -> str | None:
        """Why ``entry`` must not come back, or None."""
        try:
            check_name(entry.path, max_depth=self.limits.max_depth)
        except UnsafePath as exc:
            return f"refused a name: {exc}"
        if entry.kind != "file":
            what = "symlink" if entry.kind == "link" else entry.kind
            return f"{entry.path}: a {what}, not a file"
        if entry.mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
            return f"{entry.path}: setuid, setgid or sticky bits ({entry.mode:o})"
        bound = self.limits.max_file_bytes if max_bytes is None else max_bytes
        if entry.size > bound or total + entry.size > self.limits.max_total_bytes:
            return f"{entry.path} ({entry.size} bytes) is over the size bound"
        return None


def _earlier_archive(notebook: Path, stack: contextlib.ExitStack) -> zipfile.ZipFile | None:
    """The archive an earlier delivery wrote beside ``notebook`` (no link followed; closed with
    ``stack``), or None."""
    try:
        fd = open_beneath(notebook.parent, f"{notebook.stem}_files/{ARCHIVE}")
    except (OSError, UnsafePath):
        return None
    fh = stack.enter_context(os.fdopen(fd, "rb"))
    try:
        return stack.enter_context(zipfile.ZipFile(fh))
    except (OSError, zipfile.BadZipFile):
        return None


def _some(names: list[str], shown: int = 3) -> str:
    text = ", ".join(repr(n)[1:-1][:80] for n in names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _hidden(path: str) -> bool:
    """A well-formed relative path with a component starting with '.' (a dot file or dir)."""
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return False  # not a dot file: a name trying to escape, refused by check_name
    return any(part.startswith(".") for part in parts)
