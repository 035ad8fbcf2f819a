"""One default client TLS context per process, shared by the remote runtimes' HTTP clients.

A default client context verifies certificates against a CA bundle, and loading that bundle
costs about 50 ms of CPU (certifi's bundle, as ``httpx.create_ssl_context()`` loads it). An HTTP
client library builds one for every client or transport it is given no context for, and a
remote runtime builds clients per runtime object and, on its async face, per event loop; a
service that opens a runtime per conversation paid that bundle every time.

:func:`shared_ssl_context` builds the context once per process and CA source and hands the same
object to every later caller. The CA source is read from the environment on every call
(``SSL_CERT_FILE`` and ``SSL_CERT_DIR``, as httpx reads them when it trusts the environment), so
changing it gets a context of its own. Sharing is sound because nobody changes the context after
it is built: the HTTP clients only wrap sockets with it (httpcore sets the ALPN protocols on each
connection, to the same ``["http/1.1"]`` every time, as none of these clients enables HTTP/2).

Core has no HTTP client of its own: each distribution passes the function that builds its
library's default context (``httpx.create_ssl_context``), and the cache is keyed by it too.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Callable

__all__ = ["shared_ssl_context"]

_Key = tuple[Callable[[], ssl.SSLContext], str | None, str | None]

_contexts: dict[_Key, ssl.SSLContext] = {}
_lock = threading.Lock()


def shared_ssl_context(build: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """The process's default client TLS context as ``build()`` makes it, built on first use
    (thread-safely, once) for each CA source that ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name, and
    the same object on every later call. Callers must not change it."""
    key: _Key = (
        build,
        os.environ.get("SSL_CERT_FILE") or None,
        os.environ.get("SSL_CERT_DIR") or None,
    )
    context = _contexts.get(key)
    if context is not None:
        return context
    with _lock:
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = build()
        return context
