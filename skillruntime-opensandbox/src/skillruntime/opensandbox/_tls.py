"""One default TLS context per process for the OpenSandbox SDK's HTTP transports.

``httpx.create_ssl_context()`` with its defaults builds a new :class:`ssl.SSLContext` and loads
certifi's whole CA bundle into it (about 50 ms of CPU). The SDK calls it for every transport it
builds (one per sandbox handle and one per sandbox manager), and the async runtime builds one
``httpx.AsyncHTTPTransport`` per event loop, so each runtime paid for several bundles.

:func:`shared_ssl_context` is that default context as
:func:`skillruntime.core.runtime.tls.shared_ssl_context` shares it: built on first use, then
shared by every transport this distribution builds in the process (one per CA source, that is
per value of ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).

:func:`connection_config` builds the runtime's default :class:`ConnectionConfigSync`, whose
transports (built by the SDK, owned and closed by it exactly as before) verify with the shared
context. A caller's own ``connection_config`` is used as given, never replaced.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.transport import RetrySyncTransport
from skillruntime.core.runtime import tls

try:  # the SDK's deadline-aware stack (opensandbox 1.1.1 and later 1.x)
    from opensandbox.transport._deadline_sync import DeadlineSyncTransport
except ImportError:  # pragma: no cover - another SDK layout: its own transports are used
    DeadlineSyncTransport = None  # type: ignore[assignment,misc]

__all__ = ["SharedTLSConnectionConfigSync", "connection_config", "shared_ssl_context"]


def shared_ssl_context() -> ssl.SSLContext:
    """The process's default client TLS context: ``httpx.create_ssl_context()`` (certificates
    verified; the CA file or directory that ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name, else
    certifi's bundle), built once per CA source and process. Callers must not change it."""
    return tls.shared_ssl_context(httpx.create_ssl_context)


class SharedTLSConnectionConfigSync(ConnectionConfigSync):
    """:class:`ConnectionConfigSync` whose SDK-built transports verify TLS with
    :func:`shared_ssl_context` instead of a new default context each. Everything else is the
    SDK's: the same transport stack (deadline-aware, retry-wrapped when the policy says so),
    limits and ownership (the SDK still closes what it builds); a ``transport`` set on the config
    is used as given."""

    def new_owned_transport(
        self,
        *,
        max_connections: int | None = 100,
        max_keepalive_connections: int = 20,
        keepalive_expiry: float = 30.0,
    ) -> httpx.BaseTransport:
        """The SDK's default transport stack with the shared TLS context (the SDK's own stack
        when this SDK version lays its transports out differently).

        Every connection the pool may open is also kept alive (``max_keepalive_connections`` is
        raised to ``max_connections``). httpcore's sync pool closes the idle connections beyond
        the keep-alive limit, and it can pick one it has just handed to a waiting request: the
        request's socket is then closed under it (``[Errno 9] Bad file descriptor``), or it
        waits out its read timeout. With 200 commands at once on one sandbox (100 connections,
        20 kept alive) about one run in three lost a command that way; with no surplus to close,
        none did."""
        if max_connections is not None:
            max_keepalive_connections = max(max_keepalive_connections, max_connections)
        if DeadlineSyncTransport is None:  # pragma: no cover - see the import
            return super().new_owned_transport(
                max_connections=max_connections,
                max_keepalive_connections=max_keepalive_connections,
                keepalive_expiry=keepalive_expiry,
            )
        context = shared_ssl_context()
        inner = httpx.HTTPTransport(
            verify=context,
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_keepalive_connections,
                keepalive_expiry=keepalive_expiry,
            ),
        )
        bounded = DeadlineSyncTransport(inner, context)
        if self.retry_policy.wraps_transport():
            return RetrySyncTransport(bounded, self.retry_policy, owns_inner=True)
        return bounded


def connection_config(**fields: Any) -> ConnectionConfigSync:
    """The default connection settings of a runtime or reaper: ``ConnectionConfigSync(**fields)``
    whose transports share :func:`shared_ssl_context`."""
    return SharedTLSConnectionConfigSync(**fields)
