"""sandbox.env: the kernel gets an allowlist of the agent's environment, plus what is passed."""

from __future__ import annotations

import pytest

from kernel_agent.sandbox.env import is_secret_name, kernel_environment

# Each of these got through the old name-based filter (the security review's list).
LEAKED_BEFORE = {
    "GITHUB_PAT": "ghp_x",
    "GH_PAT": "ghp_y",
    "DATABASE_URL": "postgres://u:hunter2@db/x",
    "HTTPS_PROXY": "http://u:pw@proxy:3128",
    "https_proxy": "http://u:pw@proxy:3128",
    "PIP_INDEX_URL": "https://u:pw@pypi.example/simple",
    "MYSQL_PWD": "pw",
    "DB_PASSWD": "pw",
    "AZURE_CREDENTIAL": "c",
    "SLACK_WEBHOOK_URL": "https://hooks/x",
    "SENTRY_DSN": "https://k@sentry/1",
    "COOKIE": "session=1",
    "OPENAI_API_KEY": "sk-1",
    "PYTHONPATH": "/somewhere",
}


@pytest.mark.parametrize("name", sorted(LEAKED_BEFORE))
def test_no_secret_of_the_review_reaches_the_kernel(name: str) -> None:
    env = kernel_environment({"PATH": "/bin", name: LEAKED_BEFORE[name]})
    assert env == {"PATH": "/bin"}


def test_what_a_kernel_needs_is_kept() -> None:
    base = {
        "PATH": "/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
        "OMP_NUM_THREADS": "2", "OPENBLAS_CORETYPE": "Haswell", "MPLBACKEND": "Agg",
    }  # fmt: skip
    assert kernel_environment(base) == base


def test_passthrough_gives_exactly_the_named_variables() -> None:
    base = {"PATH": "/bin", "MY_TOKEN": "t", "DB_PASSWORD": "p", "DATA_ROOT": "/d"}
    kept = kernel_environment(base, passthrough=["MY_TOKEN", "DATA_ROOT", "NOT_SET"])
    assert kept == {"PATH": "/bin", "MY_TOKEN": "t", "DATA_ROOT": "/d"}
    assert base["DB_PASSWORD"] == "p"  # the input is not changed


def test_default_base_is_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TEST_SETTING", "v")
    monkeypatch.setenv("LC_TEST_KA", "x")
    env = kernel_environment()
    assert "SOME_TEST_SETTING" not in env and env["LC_TEST_KA"] == "x"


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GITHUB_PAT", "MYSQL_PWD", "SENTRY_DSN"])
def test_secret_names_are_recognised_for_warnings(name: str) -> None:
    assert is_secret_name(name)
