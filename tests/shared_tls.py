"""One default TLS context per test process instead of one per HTTP client.

``httpx.create_ssl_context()`` with its defaults builds a fresh :class:`ssl.SSLContext` and loads
certifi's whole CA bundle into it (about 50 ms of CPU on the 2-core machine the suite targets).
The OpenSandbox SDK calls it for every transport it builds, several per runtime, so a suite that
creates thousands of runtimes against plain-HTTP protocol doubles spent minutes of CPU parsing
certificates it never used.

:func:`share_default_ssl_context` makes the default case (``verify=True``, no client certificate)
return one context per CA source (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when ``trust_env``, else
certifi), built on first use. Every other call (``verify=False``, a caller's own context, a
certificate chain) goes to httpx unchanged. Sharing is sound for the suite: the contexts are
configured once and never changed afterwards, except that httpcore sets the ALPN protocols on
each TLS connection, and no test opens a TLS connection (every double speaks plain HTTP).
Product code is unchanged: this is installed only in the test processes, by ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any

__all__ = ["share_default_ssl_context"]


def share_default_ssl_context() -> None:
    """Install the shared default context into httpx (idempotent; see the module docstring)."""
    import httpx
    import httpx._config
    import httpx._transports.default

    if httpx.create_ssl_context.__name__ == "shared_create_ssl_context":
        return

    original = httpx._config.create_ssl_context
    contexts: dict[tuple[str | None, str | None], ssl.SSLContext] = {}
    lock = threading.Lock()

    def shared_create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert:
            return original(verify=verify, cert=cert, trust_env=trust_env)
        key = (
            os.environ.get("SSL_CERT_FILE") if trust_env else None,
            os.environ.get("SSL_CERT_DIR") if trust_env else None,
        )
        with lock:
            context = contexts.get(key)
            if context is None:
                context = contexts[key] = original(verify=True, cert=None, trust_env=trust_env)
        return context

    httpx._config.create_ssl_context = shared_create_ssl_context
    httpx._transports.default.create_ssl_context = shared_create_ssl_context  # type: ignore[attr-defined]
    httpx.create_ssl_context = shared_create_ssl_context
