"""Code that reaches back to the host: ``call_tool``, ``set_result``, ``install_package``.

- :mod:`.registry`: host tools (plain functions) and their prompt text;
- :mod:`.bridge`: the host end of the kernel's requests, over Jupyter comms;
- :mod:`.kernel_side`: the helpers' source, executed in the kernel at start;
- :mod:`.declared`: ``set_result``'s checks and file delivery;
- :mod:`.installs`: the install policy and the per-session install site;
- :mod:`.requirements`: package names and versions from strangers, checked;
- :mod:`.pip_runner`: pip wheels-only, without secrets, as a leased uid in bubblewrap;
- :mod:`.host`: :class:`~.host.HostSide`, what the agent holds of all this.
"""
