"""``shared_ssl_context``: one context per process, CA source and builder, built once even when
many threads ask at the same time."""

from __future__ import annotations

import ssl
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import skillruntime.core.runtime.tls as tls


@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


class _Builder:
    """A builder that counts its calls and is slow enough for racing callers to meet."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()

    def __call__(self) -> ssl.SSLContext:
        self.calls += 1
        self.entered.set()
        threading.Event().wait(0.05)
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def test_many_threads_at_once_get_the_one_context_built_once() -> None:
    build = _Builder()
    with ThreadPoolExecutor(16) as pool:
        contexts = list(pool.map(lambda _: tls.shared_ssl_context(build), range(64)))
    assert build.calls == 1
    assert all(context is contexts[0] for context in contexts)


def test_each_ca_source_and_builder_has_a_context_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    build, other = _Builder(), _Builder()
    default = tls.shared_ssl_context(build)
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    from_file = tls.shared_ssl_context(build)
    monkeypatch.setenv("SSL_CERT_DIR", "/etc/ssl/certs")
    from_both = tls.shared_ssl_context(build)
    assert len({id(default), id(from_file), id(from_both)}) == 3
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.delenv("SSL_CERT_DIR")
    assert tls.shared_ssl_context(build) is default
    assert tls.shared_ssl_context(other) is not default
    assert (build.calls, other.calls) == (3, 1)


def test_an_empty_variable_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    build = _Builder()
    default = tls.shared_ssl_context(build)
    monkeypatch.setenv("SSL_CERT_FILE", "")
    assert tls.shared_ssl_context(build) is default
    assert build.calls == 1
