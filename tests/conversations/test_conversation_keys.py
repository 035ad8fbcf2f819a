"""Service and storage keys: the identity of a conversation record."""

from __future__ import annotations

import re

import pytest

from skillruntime.core.conversations import service_key_for_url, storage_key_for


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Sandbox.Example:80/", "http://sandbox.example"),
        ("https://sandbox.example:443/api/", "https://sandbox.example/api"),
        ("http://sandbox.example:8080/v1", "http://sandbox.example:8080/v1"),
        ("https://sandbox.example:80", "https://sandbox.example:80"),
        ("http://user:secret@sandbox.example/v1?token=x#frag", "http://sandbox.example/v1"),
        ("sandbox.example:8080", "http://sandbox.example:8080"),
        ("http://[::1]/", "http://[::1]"),
        ("http://[::1]:80/", "http://[::1]"),
        ("http://[FE80::1]:8080/x", "http://[fe80::1]:8080/x"),
    ],
)
def test_service_key_normalises_the_url_and_drops_credentials(url: str, expected: str) -> None:
    assert service_key_for_url(url) == expected


def test_service_key_needs_a_host() -> None:
    with pytest.raises(ValueError, match="must name a host"):
        service_key_for_url("http:///path")


def test_storage_key_depends_on_service_and_conversation() -> None:
    key = storage_key_for("http://a", "c1")
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert key == storage_key_for("http://a", "c1")
    assert key != storage_key_for("http://b", "c1")
    assert key != storage_key_for("http://a", "c2")
