"""A seccomp filter for the sandbox: kernel interfaces a data-analysis kernel never needs.

bubblewrap loads it (``--seccomp FD``, a compiled BPF program made here with
libseccomp through ``pyseccomp``) just before it runs the sandbox's first command,
so it holds for every process inside. Denied, with an errno (nothing is killed):

- ``socket()`` of the vsock family (the hypervisor's sockets), and of netlink but
  for ``NETLINK_ROUTE`` (``EAFNOSUPPORT``): audit, uevents, sock_diag, netfilter...
  ``NETLINK_ROUTE`` stays: ``getifaddrs()`` needs it (zmq calls it), and in the
  sandbox's own network namespace it shows the loopback device only;
- ``io_uring_*``, ``bpf``, ``perf_event_open``, ``userfaultfd``: large kernel attack
  surface, the usual start of a local privilege escalation;
- ``keyctl``, ``add_key``, ``request_key``: the kernel keyrings;
- ``kexec_*``, ``open_by_handle_at``, ``fanotify_init``, which need capabilities the
  kernel lacks anyway (all ``EPERM``).

Only the native architecture's calls pass: a 32-bit (compat) system call kills the
thread that makes it (libseccomp's default for a foreign architecture), so the filter
cannot be dodged through another ABI.

What seccomp cannot do: look at the path a unix socket ``connect()`` names (it is
behind a pointer). A socket inside what the sandbox binds in (the ``--cwd`` view, say),
whose file mode lets any user connect, stays reachable (see the README's threat model);
the rest of the host's sockets are not in the sandbox at all (:mod:`.mounts`).

Without ``pyseccomp`` or ``libseccomp`` :func:`filter_bpf` returns None and the
sandbox runs without the filter; the launcher's status says so.
"""

from __future__ import annotations

import errno
import functools
import logging
import socket

__all__ = ["DENIED_SYSCALLS", "filter_bpf"]

log = logging.getLogger("kernel_agent.sandbox")

DENIED_SYSCALLS = (
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key",
    "kexec_load", "kexec_file_load", "open_by_handle_at", "fanotify_init",
)  # fmt: skip
_AF_VSOCK = getattr(socket, "AF_VSOCK", 40)


@functools.cache
def filter_bpf() -> bytes | None:
    """The compiled filter (BPF bytes for bwrap's ``--seccomp``), None if unavailable."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # no package, or no libseccomp.so
        log.info("no seccomp filter: %s", exc)
        return None
    import os
    import tempfile

    try:
        filt = sc.SyscallFilter(sc.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                filt.add_rule(sc.ERRNO(errno.EPERM), name)
            except (ValueError, OSError):  # not a system call on this architecture
                continue
        refused = sc.ERRNO(errno.EAFNOSUPPORT)
        filt.add_rule(refused, "socket", sc.Arg(0, sc.EQ, _AF_VSOCK))
        # netlink: only NETLINK_ROUTE (protocol 0), which getifaddrs() needs (zmq calls it);
        # in the sandbox's own network namespace it shows the loopback device only
        filt.add_rule(refused, "socket", sc.Arg(0, sc.EQ, socket.AF_NETLINK), sc.Arg(2, sc.NE, 0))
        with tempfile.TemporaryFile() as fh:
            filt.export_bpf(fh)
            fh.flush()
            os.lseek(fh.fileno(), 0, os.SEEK_SET)
            return fh.read()
    except Exception as exc:  # libseccomp refused: run without, and say so
        log.warning("no seccomp filter: %s", exc)
        return None
