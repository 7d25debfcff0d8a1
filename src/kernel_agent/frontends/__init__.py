"""The front ends: the ``kernel-agent`` CLI and its commands, the ``%%agent`` magic, the
MCP server, the terminal renderer and approval. Each consumes events or a session;
none reaches into the loop."""
