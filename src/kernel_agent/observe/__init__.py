"""``kernel-agent observe``: a local, read-only web page over the runs in a notebooks directory."""

from .app import create_app
from .runs import Bar, RunInfo, list_runs, read_run, timeline

__all__ = ["Bar", "RunInfo", "create_app", "list_runs", "read_run", "timeline"]
