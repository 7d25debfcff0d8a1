"""Settings: defaults, the environment, overrides and validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernel_agent.errors import ConfigError
from kernel_agent.settings import Settings, default_home


def test_defaults_do_not_read_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-process")
    settings = Settings.from_env({"KERNEL_AGENT_HOME": "/tmp/ka-home"})
    assert settings.api_key is None and settings.model is None
    assert settings.kernel_name == "python3" and settings.sandbox == "auto"
    assert settings.cell_timeout == 120.0 and settings.env_passthrough == ()
    assert settings.home == Path("/tmp/ka-home")


def test_environment_is_read() -> None:
    env = {
        "OPENAI_API_KEY": "sk-x",
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
        "KERNEL_AGENT_MODEL": "m",
        "KERNEL_AGENT_HOME": "~/ka",
        "KERNEL_AGENT_KERNEL": "bash",
        "KERNEL_AGENT_SANDBOX": "none",
        "KERNEL_AGENT_GATEWAY_URL": "http://gw",
        "KERNEL_AGENT_GATEWAY_TOKEN": "t",
    }
    s = Settings.from_env(env)
    assert (s.api_key, s.base_url, s.model) == ("sk-x", "http://127.0.0.1:8080/v1", "m")
    assert s.home == Path("~/ka").expanduser()
    assert (s.kernel_name, s.sandbox) == ("bash", "none")
    assert (s.gateway_url, s.gateway_token) == ("http://gw", "t")


def test_empty_environment_values_count_as_unset() -> None:
    s = Settings.from_env(
        {"OPENAI_API_KEY": "", "KERNEL_AGENT_KERNEL": "", "KERNEL_AGENT_HOME": "/h"}
    )
    assert s.api_key is None and s.kernel_name == "python3"


def test_overrides_win_and_none_means_unset() -> None:
    env = {"KERNEL_AGENT_MODEL": "from-env", "KERNEL_AGENT_HOME": "/h"}
    s = Settings.from_env(env, model="from-flag", cell_timeout=5.0, base_url=None)
    assert s.model == "from-flag" and s.cell_timeout == 5.0 and s.base_url is None
    assert Settings.from_env(env, model=None).model == "from-env"


def test_unknown_override_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'modle'"):
        Settings.from_env({}, modle="x")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cell_timeout", 0, "cell timeout must be positive"),
        ("cell_timeout", -1.0, "cell timeout must be positive"),
        ("max_steps", 0, "max steps must be at least 1"),
        ("protocol", "xml", "protocol must be auto, tools or fenced"),
        ("sandbox", "docker", "sandbox must be auto, bwrap or none"),
    ],
)
def test_invalid_values(field: str, value: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(home=tmp_path, **{field: value})
    with pytest.raises(ConfigError, match=message):
        Settings.from_env({"KERNEL_AGENT_HOME": str(tmp_path)}, **{field: value})


def test_invalid_environment_value() -> None:
    with pytest.raises(ConfigError, match="sandbox must be"):
        Settings.from_env({"KERNEL_AGENT_SANDBOX": "docker", "KERNEL_AGENT_HOME": "/h"})


def test_with_copies_and_ignores_none(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, model="a")
    t = s.with_(model="b", max_steps=None)
    assert (s.model, t.model, t.max_steps) == ("a", "b", s.max_steps)
    with pytest.raises(ConfigError):
        s.with_(cell_timeout=-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.model = "c"  # type: ignore[misc]


def test_default_home(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_home({"KERNEL_AGENT_HOME": "/x/y"}) == Path("/x/y")
    home = default_home({})
    assert home.name == "kernel-agent" and home.is_absolute()
    monkeypatch.setenv("KERNEL_AGENT_HOME", "/from/process")
    assert default_home() == Path("/from/process")


def test_input_files_become_a_tuple_of_paths():
    assert Settings(home=".", files=["a.csv", Path("~/b.xlsx")]).files == (
        Path("a.csv"),
        Path("~/b.xlsx").expanduser(),
    )
    with pytest.raises(ConfigError, match="a list of paths"):
        Settings(home=".", files="a.csv")
