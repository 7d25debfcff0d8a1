# Kernel-side half of the file transfer: this file's text is executed in a remote
# Python kernel (never imported by the host) as the body of a module object kept in
# sys.modules["_kernel_agent_files"], so the user's namespace gets no new names.
#
# The host calls these functions as user_expressions beside an empty cell (no
# execution count, nothing in the notebook). Each returns a _Json whose repr is a
# JSON document: the expression's text/plain is that JSON, read by the host with
# json.loads and checked there. Bytes travel as base64 in chunks; both sides hash
# what they wrote or read (sha256) and the host compares.
#
# The host trusts nothing said here: a hostile kernel can replace these functions.

import base64
import hashlib
import json
import os
import stat
import tempfile

WORK = ""
_puts: dict = {}  # name -> [file object, sha256, bytes written, temp path, final path]
_gets: dict = {}  # name -> [fd, sha256, bytes read]


class _Json:
    def __init__(self, value):
        self.text = json.dumps(value)

    def __repr__(self):
        return self.text


def _path(name):
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a relative file name: {name!r}")
    return os.path.join(WORK, *parts)


def setup(hint):
    """Make (or find again) the kernel's own work dir and run there."""
    global WORK
    if hint and os.path.isdir(hint):
        work = hint
    elif WORK and os.path.isdir(WORK):
        work = WORK
    else:
        work = tempfile.mkdtemp(prefix=_PREFIX)
    WORK = os.path.realpath(work)
    os.chdir(WORK)
    _remove_at_shutdown()
    return _Json({"work": WORK})


_PREFIX = "kernel-agent-work-"
_exit = {"registered": False, "restart": True}


def _remove_at_shutdown():
    """Remove the work dir when the kernel is shut down for good (not on a restart,
    not when it dies: the restarted kernel finds its files again)."""
    if _exit["registered"]:
        return
    try:
        import atexit
        import shutil

        from ipykernel.kernelbase import Kernel

        kernel = Kernel.instance()
        shutdown = kernel.do_shutdown
    except Exception:
        return

    def do_shutdown(restart):
        _exit["restart"] = bool(restart)
        return shutdown(restart)

    def remove():
        if not _exit["restart"] and os.path.basename(WORK).startswith(_PREFIX):
            shutil.rmtree(WORK, ignore_errors=True)

    kernel.do_shutdown = do_shutdown  # type: ignore[method-assign]
    atexit.register(remove)
    _exit["registered"] = True


def digest(name):
    """Size and sha256 of a regular file (None if there is none)."""
    try:
        fd = os.open(_path(name), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return _Json(None)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _Json(None)
        h, size = hashlib.sha256(), 0
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            h.update(block)
            size += len(block)
    finally:
        os.close(fd)
    return _Json({"size": size, "sha256": h.hexdigest()})


def put(name, data, offset, last):
    """Append one base64 chunk to ``name`` (a temp file until the last chunk)."""
    raw = base64.b64decode(data)
    if offset == 0:
        old = _puts.pop(name, None)
        if old is not None:
            old[0].close()
        final = _path(name)
        folder = os.path.dirname(final)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(final)}.kernel-agent-part")
        _puts[name] = [open(tmp, "wb"), hashlib.sha256(), 0, tmp, final]
    slot = _puts[name]
    if slot[2] != offset:
        raise ValueError(f"chunk at {offset}, expected {slot[2]}")
    slot[0].write(raw)
    slot[1].update(raw)
    slot[2] += len(raw)
    if not last:
        return _Json({"size": slot[2]})
    del _puts[name]
    slot[0].close()
    os.replace(slot[3], slot[4])
    return _Json({"size": slot[2], "sha256": slot[1].hexdigest()})


def remove(name):
    try:
        os.unlink(_path(name))
    except OSError:
        pass
    return _Json(True)


def abort(name):
    """Drop an unfinished upload of ``name`` (its temp file goes)."""
    slot = _puts.pop(name, None)
    if slot is not None:
        slot[0].close()
        try:
            os.unlink(slot[3])
        except OSError:
            pass
    return _Json(True)


def lstat(name):
    """[kind, size, mode] of ``name`` (a link is not followed), or None."""
    try:
        st = os.lstat(_path(name))
    except (OSError, ValueError):
        return _Json(None)
    mode = st.st_mode
    kind = (
        "link" if stat.S_ISLNK(mode) else
        "file" if stat.S_ISREG(mode) else
        "dir" if stat.S_ISDIR(mode) else "other"
    )  # fmt: skip
    return _Json([kind, st.st_size, stat.S_IMODE(mode)])


def usage(max_entries):
    """Bytes in the regular files below the work dir (links not followed), a bounded walk."""
    total, seen, queue = 0, 0, [WORK]
    while queue and seen < max_entries:
        folder = queue.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    seen += 1
                    if entry.is_dir(follow_symlinks=False):
                        queue.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return _Json(total)


def listing(max_entries, max_depth):
    """[path, kind, size, mode] for entries below the work dir (links not followed)."""
    out: list = []
    queue = [""]
    while queue and len(out) < max_entries:
        rel = queue.pop(0)
        try:
            names = sorted(os.listdir(os.path.join(WORK, rel) if rel else WORK))
        except OSError:
            continue
        for name in names:
            if len(out) >= max_entries:
                break
            path = rel + "/" + name if rel else name
            try:
                st = os.lstat(os.path.join(WORK, path))
            except OSError:
                continue
            mode = st.st_mode
            kind = (
                "link" if stat.S_ISLNK(mode) else
                "file" if stat.S_ISREG(mode) else
                "dir" if stat.S_ISDIR(mode) else "other"
            )  # fmt: skip
            out.append([path, kind, st.st_size, stat.S_IMODE(mode)])
            if kind == "dir" and path.count("/") + 1 < max_depth and not name.startswith("."):
                queue.append(path)
    return _Json(out)


def _publish(comm_id, data):
    """Send ``data`` raw, as the one buffer of a ``comm_msg`` on iopub (no base64, no JSON)."""
    from ipykernel.kernelbase import Kernel

    kernel = Kernel.instance()
    content = {"comm_id": comm_id, "data": {"kernel_agent_files": comm_id}}
    parent = kernel.get_parent("shell")
    session = kernel.session
    if session is None:
        raise RuntimeError("the kernel has no session to publish on")
    session.send(kernel.iopub_socket, "comm_msg", content, parent=parent, buffers=[data])


def get(name, offset, size, comm_id=None):
    """``size`` bytes of regular file ``name`` from ``offset`` (sequential reads): in the
    reply as base64, or (``comm_id``) raw in a comm message published before the reply."""
    if offset == 0:
        old = _gets.pop(name, None)
        if old is not None:
            os.close(old[0])
        fd = os.open(_path(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise ValueError("not a regular file")
        _gets[name] = [fd, hashlib.sha256(), 0]
    slot = _gets[name]
    if slot[2] != offset:
        raise ValueError(f"read at {offset}, expected {slot[2]}")
    data = os.read(slot[0], size)
    slot[1].update(data)
    slot[2] += len(data)
    if comm_id is None:
        reply: dict = {"data": base64.b64encode(data).decode("ascii")}
    else:
        _publish(comm_id, data)
        reply = {"sent": len(data)}
    if len(data) < size:
        os.close(slot[0])
        del _gets[name]
        reply.update(eof=True, size=slot[2], sha256=slot[1].hexdigest())
    return _Json(reply)
