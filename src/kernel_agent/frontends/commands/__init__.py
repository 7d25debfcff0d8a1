"""Subcommands of the ``kernel-agent`` CLI; see :mod:`kernel_agent.frontends.cli`."""
