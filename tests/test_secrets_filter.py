"""secrets_filter: which variables count as secret, and what the kernel is given."""

from __future__ import annotations

import pytest

from kernel_agent.secrets_filter import is_secret_name, kernel_environment


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "MY_TOKEN",
        "DB_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "github_token",
        "Api_Key",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "COLUMNS", "MPLBACKEND", "LANG", "PYTHONPATH"])
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_kernel_environment_drops_secrets_and_keeps_the_rest() -> None:
    base = {"PATH": "/bin", "OPENAI_API_KEY": "sk", "MY_TOKEN": "t", "DB_PASSWORD": "p"}
    assert kernel_environment(base) == {"PATH": "/bin"}
    assert base["OPENAI_API_KEY"] == "sk"  # the input is not changed


def test_passthrough_keeps_named_secrets_only() -> None:
    base = {"PATH": "/bin", "MY_TOKEN": "t", "DB_PASSWORD": "p"}
    kept = kernel_environment(base, passthrough=["MY_TOKEN", "NOT_SET_TOKEN"])
    assert kept == {"PATH": "/bin", "MY_TOKEN": "t"}


def test_default_base_is_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TEST_SECRET", "s")
    monkeypatch.setenv("SOME_TEST_SETTING", "v")
    env = kernel_environment()
    assert "SOME_TEST_SECRET" not in env and env["SOME_TEST_SETTING"] == "v"
