"""Counting the default TLS contexts httpx builds, for the tests of the shared context
(:mod:`skillruntime.core.runtime.tls`)."""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import httpx._config
import httpx._transports.default
import pytest

import skillruntime.core.runtime.tls as core_tls


def count_default_contexts(monkeypatch: pytest.MonkeyPatch) -> list[ssl.SSLContext]:
    """The default contexts (``verify=True``: the CA bundle loaded) that httpx builds from now
    on, wherever it is asked (its transports, an SDK, :func:`shared_ssl_context`); the shared
    cache starts empty and the CA source is httpx's default one."""
    original = httpx._config.create_ssl_context
    built: list[ssl.SSLContext] = []

    def counting(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        context = original(verify=verify, cert=cert, trust_env=trust_env)
        if verify is True:
            built.append(context)
        return context

    monkeypatch.setattr(httpx._config, "create_ssl_context", counting)
    monkeypatch.setattr(httpx._transports.default, "create_ssl_context", counting)
    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    monkeypatch.setattr(core_tls, "_contexts", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    return built
