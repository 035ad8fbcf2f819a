"""Async handles on sandboxes the sync lifecycle attached.

The async runtime leaves creating, finding, health-checking, renewing, replacing and killing
sandboxes, and every conversation-record write, to the sync code of
:class:`~.runtime.OpenSandboxSkillRuntime` (one copy of those rules, run in a worker thread once
per attach). It then opens an SDK ``Sandbox`` on the same id, on the endpoints the sync handle
already looked up (no request at all: the sandbox was just health-checked, and a second lookup
would cost the attach two more lifecycle requests than the sync runtime's), whose HTTP connection
pool carries every command and file call.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta

import httpx

from opensandbox.adapters.factory import AdapterFactory
from opensandbox.config.connection import ConnectionConfig
from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.models.sandboxes import SandboxEndpoint, SandboxOrigin
from opensandbox.sandbox import Sandbox
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.runtime.loop_local import LoopLocal

from ._tls import shared_ssl_context
from .errors import sandbox_error

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "async_connection_config",
    "async_transport",
    "close_async_handle",
    "open_async_handle",
]

logger = logging.getLogger(__name__)


DEFAULT_MAX_CONNECTIONS = 512
"""Connections of an async runtime's pool: each running command holds one for its stream."""


def async_transport(max_connections: int) -> httpx.AsyncBaseTransport:
    """The connection pool of an async runtime (the SDK's default holds 100 connections, which
    would queue the 101st concurrent command behind the others), one per event loop: a runtime
    object serves consecutive loops (``asyncio.run`` per call) and never uses a socket of one
    loop on another."""
    return _PerLoopTransport(max_connections)


class _PerLoopTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncHTTPTransport`` per event loop, each closed on its loop when the loop
    shuts down (:class:`~skillruntime.core.runtime.async_spi.LoopLocal`); :meth:`aclose` closes
    them all."""

    def __init__(self, max_connections: int) -> None:
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=min(max_connections, 64),
            keepalive_expiry=30.0,
        )
        self._pools: LoopLocal[httpx.AsyncHTTPTransport] = LoopLocal(
            lambda: httpx.AsyncHTTPTransport(verify=shared_ssl_context(), limits=limits),
            aclose=httpx.AsyncHTTPTransport.aclose,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pool = await self._pools.aget()
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        await self._pools.aclose()


def async_connection_config(
    config: ConnectionConfigSync, transport: httpx.AsyncBaseTransport
) -> ConnectionConfig:
    """The async SDK connection settings equal to the sync ``config``, on ``transport`` (which
    the caller owns and closes: SDK handles leave a given transport open)."""
    return ConnectionConfig(
        transport=transport,
        api_key=config.api_key,
        domain=config.domain,
        protocol=config.protocol,
        request_timeout=config.request_timeout,
        debug=config.debug,
        user_agent=config.user_agent,
        headers=dict(config.headers),
        follow_redirects=config.follow_redirects,
        retry_policy=config.retry_policy,
        use_server_proxy=config.use_server_proxy,
        endpoint_cache_ttl=config.endpoint_cache_ttl,
        endpoint_cache_size=config.endpoint_cache_size,
        endpoint_cache_disabled=config.endpoint_cache_disabled,
        disable_metrics=config.disable_metrics,
    )


async def open_async_handle(
    sync: SandboxSync, config: ConnectionConfig, *, ready_timeout_seconds: float
) -> Sandbox:
    """An async handle on the running sandbox of the sync handle ``sync`` (no health check),
    built on the endpoints ``sync`` resolved; looked up again only when they are not known."""
    known = _known_handle(sync, config)
    if known is not None:
        return known
    try:
        return await Sandbox.connect(
            sync.id,
            connection_config=config,
            connect_timeout=timedelta(seconds=ready_timeout_seconds),
            skip_health_check=True,
        )
    except Exception as exc:
        raise sandbox_error(f"connecting to sandbox {sync.id}", exc) from exc


def _known_handle(sync: SandboxSync, config: ConnectionConfig) -> Sandbox | None:
    """The async handle on the endpoints the sync handle holds, as ``Sandbox.connect`` builds
    it; ``None`` when they cannot be read (then the caller looks them up)."""
    execd = getattr(getattr(sync, "_command_service", None), "execd_endpoint", None)
    if not isinstance(execd, SandboxEndpoint):
        return None
    factory = AdapterFactory(config)
    origin = execd.origin or SandboxOrigin.UNKNOWN
    if origin == SandboxOrigin.TEMPLATE:
        egress_service = factory.create_network_policy_service(sync.id)
    else:
        egress = getattr(getattr(sync, "_egress_service", None), "endpoint", None)
        if not isinstance(egress, SandboxEndpoint):
            return None
        egress_service = factory.create_egress_service(egress)
    return Sandbox(
        sandbox_id=sync.id,
        sandbox_service=factory.create_sandbox_service(),
        filesystem_service=factory.create_filesystem_service(execd),
        command_service=factory.create_command_service(execd),
        health_service=factory.create_health_service(execd),
        metrics_service=factory.create_metrics_service(execd),
        egress_service=egress_service,
        diagnostics_service=factory.create_diagnostics_service(),
        isolated_service=factory.create_isolated_session_service(execd),
        connection_config=config,
        origin=origin,
    )


async def close_async_handle(handle: Sandbox | None) -> None:
    """Close the local async handle only (the remote sandbox keeps running)."""
    if handle is not None:
        with contextlib.suppress(Exception):
            await handle.close()
