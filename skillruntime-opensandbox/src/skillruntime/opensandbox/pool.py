"""Warm pools of the OpenSandbox runtime: core's :class:`~skillruntime.core.conversations.pools.
WarmPool` over :class:`OpenSandboxPoolDriver`.

The rules (claim through a conversation-store lease, refill, reaping past the TTL, counters) are
core's (:mod:`skillruntime.core.conversations.pools`); this module only speaks to the server
through :class:`.sandbox.SandboxClient`. A member is a sandbox created with the deployment's
image, entrypoint, resources, network policy and base environment, the metadata
``skillruntime-role=pool`` and ``skillruntime-pool=<pool key>`` (a hash of those settings, the
deployment metadata and ``conversations_root``), and a **life of the pool's TTL**: a member
nobody claims ends on the server at its TTL even when every node that could remove it died
(never leaked). A claimed member is renewed to ``sandbox_timeout_seconds`` like any attached
sandbox, and the lifecycle retags it as the conversation's (metadata can change after creation).
Its workspace lives in the sandbox, as a cold one's: ``storage`` is ``None``. See
``docs/opensandbox-runtime.md``, "Warm pools".
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.pools import (
    CLAIM_TTL_SECONDS,
    DEFAULT_POOL_TTL_SECONDS,
    DEFAULT_REFILL_DELAY_SECONDS,
    PoolMember,
    WarmPool,
    close_pools,
    pool_key,
    pool_store,
    shared_pool,
)
from skillruntime.core.conversations.sandboxes import TAG_RUNTIME

from .driver import OpenSandboxDriver
from .sandbox import SandboxClient, SandboxSettings

__all__ = [
    "DEFAULT_POOL_TTL_SECONDS",
    "OpenSandboxPool",
    "OpenSandboxPoolDriver",
    "close_pools",
    "opensandbox_pool",
    "opensandbox_pool_key",
]

RUNTIME_NAME = "opensandbox"


def opensandbox_pool_key(settings: SandboxSettings, conversations_root: str) -> str:
    """The pool key of OpenSandbox members: what makes two of them interchangeable."""
    return pool_key(
        {
            "image": settings.image,
            "entrypoint": settings.entrypoint,
            "resources": dict(settings.resources),
            "environment": dict(settings.environment),
            "network_policy": repr(settings.network_policy),
            "metadata": dict(settings.metadata),
            "conversations_root": conversations_root,
        }
    )


class OpenSandboxPoolDriver:
    """Members on one server (the pool's own client: it outlives the runtimes); the handle is
    the SDK's :class:`~opensandbox.sync.sandbox.SandboxSync`."""

    def __init__(self, client: SandboxClient, *, ttl_seconds: float) -> None:
        self.client = client
        self.sandboxes = OpenSandboxDriver(client)
        self.ttl_seconds = ttl_seconds

    def create_member(self, tags: Mapping[str, str]) -> PoolMember:
        """A ready sandbox living ``ttl_seconds`` (its handle is closed: a claim connects)."""
        sandbox = self.client.create(tags, timeout_seconds=self.ttl_seconds)
        try:
            return PoolMember(sandbox.id, None, time.time(), dict(tags))
        finally:
            self.client.release(sandbox)

    def list_members(self, tags: Mapping[str, str]) -> Iterator[PoolMember]:
        """The live sandboxes whose metadata holds every tag (a value the server holds cut is
        reported as the value asked for, as the sandbox driver does)."""
        for found in self.sandboxes.list_tagged(tags):
            born = found.created_at if found.created_at is not None else 0.0
            yield PoolMember(found.sandbox_id, None, born, found.tags)

    def connect_member(self, member: PoolMember) -> SandboxSync | None:
        """The member attached and renewed to ``sandbox_timeout_seconds``; ``None`` when it is
        gone or has ended."""
        return self.sandboxes.connect(member.sandbox_id)

    def remove_member(self, member: PoolMember) -> None:
        """Terminate the member (one already gone counts as removed)."""
        self.client.kill(member.sandbox_id)

    def release(self, handle: SandboxSync) -> None:
        """Close the handle's transport (the sandbox runs on)."""
        self.client.release(handle)

    def close(self) -> None:
        """Close the pool's client."""
        self.client.close()


class OpenSandboxPool(WarmPool[SandboxSync]):
    """Warm sandboxes of one deployment on one server (see the module docs and
    :class:`~skillruntime.core.conversations.pools.WarmPool`)."""

    def __init__(
        self,
        config: ConnectionConfigSync,
        settings: SandboxSettings,
        store: ConversationStore,
        *,
        size: int,
        conversations_root: str,
        ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
        refill_delay_seconds: float = DEFAULT_REFILL_DELAY_SECONDS,
        claim_ttl_seconds: float = CLAIM_TTL_SECONDS,
        owns_store: bool = False,
    ) -> None:
        client = SandboxClient(config, settings)
        super().__init__(
            OpenSandboxPoolDriver(client, ttl_seconds=ttl_seconds),
            store,
            size=size,
            key=opensandbox_pool_key(settings, conversations_root),
            tags={**settings.metadata, TAG_RUNTIME: RUNTIME_NAME},
            ttl_seconds=ttl_seconds,
            refill_delay_seconds=refill_delay_seconds,
            claim_ttl_seconds=claim_ttl_seconds,
            name="opensandbox-pool",
            owns_store=owns_store,
        )


def opensandbox_pool(
    config: ConnectionConfigSync,
    settings: SandboxSettings,
    store: ConversationStore,
    *,
    conversation_store: ConversationStore | str | None,
    size: int,
    conversations_root: str,
    ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
) -> OpenSandboxPool:
    """The process's pool for this server, store and pool key (made and started on first use;
    it has its own client, and its own store when the runtime was given a URL, so it outlives
    the runtimes that use it)."""
    store_identity, open_store = pool_store(conversation_store, store)
    key = opensandbox_pool_key(settings, conversations_root)

    def make() -> OpenSandboxPool:
        member_store, owns = open_store()
        return OpenSandboxPool(
            config,
            settings,
            member_store,
            size=size,
            conversations_root=conversations_root,
            ttl_seconds=ttl_seconds,
            owns_store=owns,
        )

    return shared_pool(("opensandbox", config.get_base_url(), store_identity, key), make)
