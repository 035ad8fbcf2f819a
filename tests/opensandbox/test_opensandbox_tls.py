"""The runtime's SDK transports share one default TLS context per process (``_tls``).

Loading certifi's CA bundle costs ~50 ms of CPU per default context; the SDK would build one per
sandbox handle and per manager, and the async runtime one per event loop. Every test here starts
from an empty per-process cache and counts the default contexts httpx builds.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import certifi
import httpx
import pytest
from opensandbox.config.connection_sync import ConnectionConfigSync

import skillruntime.core.runtime.tls as core_tls
import skillruntime.opensandbox._tls as tls
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.opensandbox.async_runtime import AsyncOpenSandboxSkillRuntime
from skillruntime.opensandbox.sweeping import OpenSandboxReaper


def _use(runtime: OpenSandboxSkillRuntime) -> None:
    try:
        assert runtime.execute(SkillExecutionRequest(command="echo hi")).stdout == "hi\n"
        runtime.get_file_system().write_text("tls.txt", "kept")
    finally:
        runtime.close()


def _runtime(double: OpenSandboxDouble, **options: Any) -> OpenSandboxSkillRuntime:
    return OpenSandboxSkillRuntime(domain=double.domain, api_key=double.api_key, **options)


def test_one_runtime_builds_one_tls_context(
    opensandbox_double: OpenSandboxDouble, default_contexts: list[ssl.SSLContext]
) -> None:
    _use(_runtime(opensandbox_double))
    assert len(default_contexts) == 1
    assert default_contexts[0] is tls.shared_ssl_context()


def test_two_runtimes_and_a_reaper_share_the_one_tls_context(
    opensandbox_double: OpenSandboxDouble, default_contexts: list[ssl.SSLContext]
) -> None:
    _use(_runtime(opensandbox_double))
    _use(_runtime(opensandbox_double))
    reaper = OpenSandboxReaper(domain=opensandbox_double.domain, api_key=opensandbox_double.api_key)
    try:
        reaper.orphans([])
    finally:
        reaper.close()
    assert len(default_contexts) == 1


def test_async_runtimes_on_several_loops_share_the_one_tls_context(
    opensandbox_double: OpenSandboxDouble, default_contexts: list[ssl.SSLContext]
) -> None:
    async def use(runtime: AsyncOpenSandboxSkillRuntime) -> None:
        result = await runtime.execute(SkillExecutionRequest(command="echo hi"))
        assert result.stdout == "hi\n"

    for _ in range(2):
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        )
        asyncio.run(use(runtime))  # one event loop ...
        asyncio.run(use(runtime))  # ... then another, each with its own connection pool
        asyncio.run(runtime.close())
    assert len(default_contexts) == 1


def test_the_ca_source_of_the_environment_gets_a_context_of_its_own(
    default_contexts: list[ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    default = tls.shared_ssl_context()
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    from_file = tls.shared_ssl_context()
    assert from_file is not default
    assert tls.shared_ssl_context() is from_file
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls.shared_ssl_context() is default
    assert len(default_contexts) == 2
    assert default.verify_mode == ssl.CERT_REQUIRED
    assert default.check_hostname


def test_a_callers_connection_config_is_used_as_given(
    opensandbox_double: OpenSandboxDouble, default_contexts: list[ssl.SSLContext]
) -> None:
    config = ConnectionConfigSync(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
    )
    runtime = OpenSandboxSkillRuntime(connection_config=config)
    assert runtime._config is config
    assert type(config) is ConnectionConfigSync
    _use(runtime)
    assert core_tls._contexts == {}  # the SDK built its own transports, as it always has
    assert default_contexts


def _http_transport(transport: object) -> httpx.HTTPTransport:
    """The ``httpx.HTTPTransport`` at the bottom of the SDK's wrappers (retry, deadline)."""
    while not isinstance(transport, httpx.HTTPTransport):
        transport = getattr(transport, "inner", None) or transport._inner
    return transport


def test_the_default_config_keeps_the_sdks_transport_stack_and_keeps_every_connection_alive(
    default_contexts: list[ssl.SSLContext],
) -> None:
    config = tls.connection_config(domain="example.invalid:1", api_key="k")
    assert isinstance(config, ConnectionConfigSync)
    assert config.owns_transport
    assert config.transport is None
    owned = config.with_transport_if_missing()
    plain = ConnectionConfigSync(domain="example.invalid:1", api_key="k")
    reference = plain.with_transport_if_missing()
    assert owned.owns_transport
    assert owned.transport is not None
    assert reference.transport is not None
    assert type(owned.transport) is type(reference.transport)
    assert owned.model_dump(exclude={"transport", "headers"}) == plain.model_dump(
        exclude={"transport", "headers"}
    )
    limits = _http_transport(owned.transport)._pool
    expected = _http_transport(reference.transport)._pool
    # The SDK's connection limit; every connection kept alive, so that the pool never closes a
    # surplus idle connection it may have just handed to a waiting request (see _tls).
    assert limits._max_connections == expected._max_connections
    assert expected._max_keepalive_connections < expected._max_connections
    assert limits._max_keepalive_connections == limits._max_connections
    assert limits._ssl_context is tls.shared_ssl_context()
    owned.close_transport_if_owned()
    reference.close_transport_if_owned()
