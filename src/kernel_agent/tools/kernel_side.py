# Kernel-side helpers: this file's text is executed (silently) in a Python kernel at
# start; the host never imports it. It defines call_tool, call_tools_parallel,
# set_result and install_package in the user namespace.
#
# Requests go to the host as comm messages on iopub (the kernel's own channels). The
# host's replies arrive as comm_msg on shell; a kernel's main thread is busy running
# the cell, so the replies are routed to a subshell (ipykernel >= 7), whose thread
# hands them to the waiting call. A call first waits ``ack_s`` for the host to
# acknowledge it: no acknowledgement means nobody is listening (a verify re-run, a
# plain notebook run), and the call fails with a clear message instead of hanging.


def __kernel_agent_setup(config):
    import json
    import sys
    import threading
    import uuid

    class ToolError(Exception):
        """A host tool raised, or refused the call; the message is the host's."""

    class ToolTimeout(ToolError):
        """A host tool did not answer within its timeout."""

    class NoHostListening(RuntimeError):
        """No kernel-agent host answers this kernel's requests."""

    state = {"comm": None, "subshell": None, "why": None}
    pending = {}  # request id -> [threading.Event, reply or None, ack Event]
    lock = threading.Lock()
    listening = bool(config.get("listening")) and config.get("rerun") is None
    ack_s = float(config.get("ack_s", 5.0))

    def label(op):
        return {"call": "call_tool", "install": "install_package"}.get(op, op)

    def on_msg(msg):
        data = msg["content"].get("data") or {}
        with lock:
            slot = pending.get(data.get("id"))
        if slot is None:
            return
        if data.get("op") == "ack":
            slot[2].set()
        else:
            slot[1] = data
            slot[2].set()
            slot[0].set()

    def open_comm():
        if state["comm"] is not None or state["why"] is not None:
            return state["comm"]
        try:
            import comm as comm_pkg
            from ipykernel.kernelbase import Kernel

            kernel = Kernel.instance()
            manager = getattr(kernel, "shell_channel_thread", None)
            manager = getattr(manager, "manager", None)
            if manager is None:
                raise RuntimeError("this ipykernel has no subshells (ipykernel >= 7 is needed)")
            sock = manager.control_to_shell_channel.from_socket
            sock.send_json({"type": "create"})
            reply = sock.recv_json()
            if reply.get("status") != "ok":
                raise RuntimeError(reply.get("evalue", "could not create a subshell"))
            subshell = reply["subshell_id"]
            c = comm_pkg.create_comm(target_name="kernel_agent", data={"subshell_id": subshell})
            # the host's replies go to the subshell, whose thread is free while a cell runs
            c._reply_subshell_for = lambda data, default: subshell
            c.on_msg(on_msg)
        except Exception as exc:  # noqa: BLE001
            state["why"] = f"{type(exc).__name__}: {exc}"
            return None
        state["comm"], state["subshell"] = c, subshell
        return c

    def request(op, payload, timeout):
        try:  # strictly: the comm layer would quietly turn a set into a list
            json.dumps(payload, allow_nan=False)
        except (TypeError, ValueError) as exc:
            what = "the data" if op == "set_result" else "the arguments"
            raise ToolError(f"{label(op)}: {what} is not JSON-serialisable: {exc}") from None
        if not listening:
            raise NoHostListening(
                f"{label(op)}: no kernel-agent host is listening to this kernel (a verify re-run "
                "or a plain notebook run); host tools are only available during an agent run"
            )
        c = open_comm()
        if c is None:
            raise NoHostListening(f"{label(op)}: the host bridge is unavailable: {state['why']}")
        rid = uuid.uuid4().hex
        slot = [threading.Event(), None, threading.Event()]
        with lock:
            pending[rid] = slot
        try:
            c.send({"op": op, "id": rid, "subshell_id": state["subshell"], **payload})
            if not slot[2].wait(ack_s):
                raise NoHostListening(
                    f"{label(op)}: no kernel-agent host acknowledged the request within "
                    f"{ack_s:g} s; host tools are only available during an agent run"
                )
            if not slot[0].wait(timeout):
                raise ToolTimeout(f"{label(op)}: no answer from the host within {timeout:g} s")
            return slot[1]
        finally:
            with lock:
                pending.pop(rid, None)

    def answer(reply):
        if reply.get("ok"):
            return reply.get("value")
        kind = reply.get("error_type") or "ToolError"
        cls = ToolTimeout if kind == "ToolTimeout" else ToolError
        raise cls(reply.get("error") or "the host refused the call")

    def results(reply):
        if "results" not in reply:  # the whole batch failed
            answer(dict(reply, ok=False))
        return reply["results"]

    default_timeout = float(config.get("timeout", 60.0))

    def call_tool(name, /, **kwargs):
        """Call the host tool ``name`` with keyword arguments; returns its (JSON) result."""
        reply = request(
            "call", {"calls": [{"tool": name, "kwargs": kwargs}]}, default_timeout + ack_s
        )
        return answer(results(reply)[0])

    def call_tools_parallel(calls):
        """Run ``[(name, {kwargs}), ...]`` concurrently on the host; results in order.

        The first failing call raises (after all have finished).
        """
        batch = [{"tool": name, "kwargs": dict(kwargs or {})} for name, kwargs in calls]
        if not batch:
            return []
        reply = request("call", {"calls": batch}, default_timeout + ack_s)
        return [answer(r) for r in results(reply)]

    rerun = config.get("rerun")  # a verify re-run: {"installs": {name: version}}

    def set_result(data, files=()):
        """Declare the run's structured result (JSON) and its output files (work-dir paths)."""
        if isinstance(files, str):
            files = [files]
        payload = {"data": data, "files": [str(f) for f in files]}
        if rerun is not None:  # nobody takes the result; the cell still reproduces
            try:
                json.dumps(payload, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ToolError(f"set_result: the data is not JSON-serialisable: {exc}") from None
            return None
        answer(request("set_result", payload, 60.0))
        return None

    def canonical(name):
        import re

        return re.sub(r"[-_.]+", "-", name.split("==")[0]).lower()

    def install_here(value):
        """Run pip in this kernel's own environment into a site of its own, and report."""
        import os
        import subprocess
        import tempfile

        if state.get("site") is None:
            state["site"] = tempfile.mkdtemp(prefix="kernel-agent-site-")
        site = state["site"]
        argv = [sys.executable, "-I", "-m", "pip", "install", "--target", site, *value["pip"]]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                timeout=float(config.get("install_s", 600.0)),
            )  # fmt: skip
            ok, error = proc.returncode == 0, proc.stderr[-2000:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}"
        installed = {}
        for entry in sorted(os.listdir(site)):
            if not entry.endswith(".dist-info"):
                continue
            meta = {}
            try:
                with open(os.path.join(site, entry, "METADATA"), encoding="utf-8") as fh:
                    for line in fh:
                        if not line.strip():
                            break
                        key, _, val = line.partition(":")
                        meta.setdefault(key.strip(), val.strip())
            except OSError:
                continue
            if meta.get("Name") and meta.get("Version"):
                installed[meta["Name"]] = meta["Version"]
        report = {"name": value["name"], "ok": ok, "error": error, "installed": installed}
        done = answer(request("installed", report, 60.0))
        return {"name": done.get("name"), "version": done.get("version"), "path": site}

    def install_package(name):
        """Install ``name`` from the host's package index, under the run's install policy."""
        import importlib

        name = str(name)
        if rerun is not None:  # verify put the recorded versions on sys.path already
            found = {canonical(n): (n, v) for n, v in rerun.get("installs", {}).items()}
            if canonical(name) not in found:
                raise NoHostListening(
                    f"install_package: {name} was not installed in the recorded run, and "
                    "no kernel-agent host is listening to install it now"
                )
            project, version = found[canonical(name)]
        else:
            value = answer(
                request("install", {"name": name}, float(config.get("install_s", 600.0)))
            )
            if value.get("pip") is not None:  # a remote kernel: pip runs here, host permitted
                value = install_here(value)
            path = value.get("path")
            if path and path not in sys.path:
                sys.path.insert(0, path)
            project, version = value.get("name"), value.get("version")
        importlib.invalidate_caches()
        print(f"installed {project} {version}")

    for f in (call_tool, call_tools_parallel, set_result, install_package):
        f.__module__ = "kernel_agent"
    for cls in (ToolError, ToolTimeout, NoHostListening):
        cls.__module__ = "kernel_agent"
    call_tool.ToolError, call_tool.ToolTimeout = ToolError, ToolTimeout
    call_tool.NoHostListening = NoHostListening
    return {
        "call_tool": call_tool,
        "call_tools_parallel": call_tools_parallel,
        "set_result": set_result,
        "install_package": install_package,
        "ToolError": ToolError,
    }
