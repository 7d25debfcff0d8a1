"""The Host and Origin rules every server shares (pure; the servers are tested in
tests/test_attacks_servers.py)."""

from __future__ import annotations

import pytest

from kernel_agent.edges.webguard import host_allowed, host_name, is_loopback_host, origin_allowed


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("LOCALHOST", "localhost"),
        ("[::1]:80", "::1"),
        ("example.org", "example.org"),
        ("127.0.0.1:x@evil", None),
        ("localhost:anything", None),
        ("", None),
        ("[::1", None),
        ("a b", None),
        ("host:1234567", None),
    ],
)
def test_host_name(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_loopback_bind_answers_loopback_names_only() -> None:
    for ok in ("127.0.0.1:1", "localhost:2", "[::1]:3", "127.0.0.2:4"):
        assert host_allowed(ok, loopback_only=True), ok
    for bad in ("evil.example:1", "localhost.evil", "127.0.0.1.evil", "10.0.0.1:1", "2130706433",
                "127.1"):  # fmt: skip
        assert not host_allowed(bad, loopback_only=True), bad


def test_other_binds_take_ip_literals_and_listed_names() -> None:
    assert host_allowed("10.0.0.1:8000", loopback_only=False)
    assert host_allowed("[2001:db8::1]:8000", loopback_only=False)
    assert not host_allowed("box.example:8000", loopback_only=False)
    assert host_allowed("Box.Example:8000", loopback_only=False, names=["box.example"])


def test_origins() -> None:
    host = "127.0.0.1:8000"
    same = {"same_origin": True, "loopback_only": True}
    assert origin_allowed("http://127.0.0.1:8000", host, **same)
    for bad in ("null", "http://127.0.0.1:9000", "http://evil.example:8000", "file://", ""):
        assert not origin_allowed(bad, host, **same), bad
    mcp = {"same_origin": False, "loopback_only": True}
    assert origin_allowed("http://localhost:6274", host, **mcp)  # an inspector on another port
    assert not origin_allowed("http://evil.example:8000", host, **mcp)
    assert not origin_allowed("null", host, **mcp)


def test_is_loopback_host() -> None:
    assert is_loopback_host("127.0.0.2") and is_loopback_host("localhost")
    assert not is_loopback_host("0.0.0.0") and not is_loopback_host("example.org")
