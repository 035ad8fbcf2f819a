"""Warm pools of the Docker runtime: core's :class:`~skillruntime.core.conversations.pools.
WarmPool` over :class:`DockerPoolDriver`.

The rules (claim through a conversation-store lease, refill, reaping past the TTL, counters) are
core's (:mod:`skillruntime.core.conversations.pools`); this module only speaks to the engine. A
member is a started container on its **own** volume ``skillruntime-pool-<random>`` mounted at
``conversations_root`` (mounts and labels are fixed at creation, so a member cannot be made on a
conversation's volume before the conversation exists; the record's ``sandbox_storage`` names the
member's volume from then on). Members carry the labels ``skillruntime-role=pool``,
``skillruntime-pool=<pool key>`` (a hash of image, security settings, base environment,
deployment labels and ``conversations_root``) and ``skillruntime-volume=<their volume>``. The
Docker sweep (:class:`.sweeping.DockerReaper`) removes members and member volumes no record
names once older than the TTL. See ``docs/docker-runtime.md``, "Warm pools", for the cost and
the knobs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Mapping

from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.pools import (
    CLAIM_TTL_SECONDS,
    DEFAULT_POOL_TTL_SECONDS,
    DEFAULT_REFILL_DELAY_SECONDS,
    ROLE_POOL,
    TAG_POOL,
    PoolMember,
    WarmPool,
    close_pools,
    pool_key,
    pool_lease_key,
    pool_store,
    shared_pool,
)
from skillruntime.core.conversations.sandboxes import TAG_ROLE, TAG_RUNTIME

from .engine import DockerEngine
from .security import ContainerSecurity

__all__ = [
    "DEFAULT_POOL_TTL_SECONDS",
    "LABEL_POOL",
    "LABEL_VOLUME",
    "POOL_VOLUME_PREFIX",
    "ROLE_POOL",
    "DockerPool",
    "DockerPoolDriver",
    "close_pools",
    "docker_pool",
    "docker_pool_key",
    "member_labels",
    "pool_lease_key",
]

LABEL_POOL = TAG_POOL
"""The label holding a member's pool key."""
LABEL_VOLUME = "skillruntime-volume"
"""The label naming a member's own volume."""
POOL_VOLUME_PREFIX = "skillruntime-pool-"


def member_labels(deployment: Mapping[str, str], volume: str | None = None) -> dict[str, str]:
    """The labels every member of ``deployment`` carries (``volume``: its own volume's)."""
    labels = {**deployment, TAG_RUNTIME: "docker", TAG_ROLE: ROLE_POOL}
    if volume is not None:
        labels[LABEL_VOLUME] = volume
    return labels


def docker_pool_key(
    *,
    image: str,
    security: ContainerSecurity,
    environment: Mapping[str, str],
    labels: Mapping[str, str],
    conversations_root: str,
) -> str:
    """The pool key of Docker members: what makes two of them interchangeable."""
    return pool_key(
        {
            "image": image,
            "security": repr(security),
            "environment": dict(environment),
            "labels": dict(labels),
            "conversations_root": conversations_root,
        }
    )


class DockerPoolDriver:
    """Members on one engine (the pool's own client: it outlives the runtimes); the handle is
    the container id."""

    def __init__(
        self,
        engine: DockerEngine,
        *,
        image: str,
        security: ContainerSecurity,
        environment: Mapping[str, str],
        conversations_root: str,
    ) -> None:
        self.engine = engine
        self.image = image
        self.security = security
        self.environment = dict(environment)
        self.conversations_root = conversations_root

    def create_member(self, tags: Mapping[str, str]) -> PoolMember:
        """A started container on a new volume of its own (the volume is removed when the
        container cannot be made)."""
        volume = POOL_VOLUME_PREFIX + secrets.token_hex(16)
        labels = {**tags, LABEL_VOLUME: volume}
        self.engine.ensure_volume(volume, labels)
        try:
            container_id = self.engine.create_container(
                image=self.image,
                user=None,
                labels=labels,
                security=self.security,
                volume=(volume, self.conversations_root),
                environment=self.environment,
            )
        except BaseException:
            self.engine.remove_volume(volume)
            raise
        return PoolMember(container_id, volume, time.time(), labels)

    def list_members(self, tags: Mapping[str, str]) -> Iterator[PoolMember]:
        """Running containers carrying ``tags`` on a member volume."""
        for item in self.engine.list_containers(tags):
            labels = item.get("Labels") or {}
            volume = str(labels.get(LABEL_VOLUME, ""))
            if not volume.startswith(POOL_VOLUME_PREFIX) or item.get("State") != "running":
                continue
            yield PoolMember(
                str(item.get("Id", "")), volume, float(item.get("Created") or 0), labels
            )

    def connect_member(self, member: PoolMember) -> str | None:
        """The container id while the container runs (one ``GET /containers/{id}/json``);
        ``None`` when it is gone or stopped."""
        info = self.engine.inspect(member.sandbox_id)
        state = (info or {}).get("State") or {}
        return member.sandbox_id if state.get("Running") else None

    def remove_member(self, member: PoolMember) -> None:
        """Remove the container and its volume."""
        self.engine.remove_container(member.sandbox_id)
        if member.storage:
            self.engine.remove_volume(member.storage)

    def release(self, handle: str) -> None:
        """Nothing to close: the handle is an id."""

    def close(self) -> None:
        """Close the pool's engine client."""
        self.engine.close()


class DockerPool(WarmPool[str]):
    """Warm containers of one deployment and image (see the module docs and
    :class:`~skillruntime.core.conversations.pools.WarmPool`)."""

    def __init__(
        self,
        engine: DockerEngine,
        store: ConversationStore,
        *,
        size: int,
        image: str,
        security: ContainerSecurity,
        environment: Mapping[str, str],
        labels: Mapping[str, str],
        conversations_root: str,
        ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
        refill_delay_seconds: float = DEFAULT_REFILL_DELAY_SECONDS,
        claim_ttl_seconds: float = CLAIM_TTL_SECONDS,
        owns_store: bool = False,
    ) -> None:
        super().__init__(
            DockerPoolDriver(
                engine,
                image=image,
                security=security,
                environment=environment,
                conversations_root=conversations_root,
            ),
            store,
            size=size,
            key=docker_pool_key(
                image=image,
                security=security,
                environment=environment,
                labels=labels,
                conversations_root=conversations_root,
            ),
            tags=member_labels(labels),
            ttl_seconds=ttl_seconds,
            refill_delay_seconds=refill_delay_seconds,
            claim_ttl_seconds=claim_ttl_seconds,
            name="docker-pool",
            owns_store=owns_store,
        )


def docker_pool(
    engine: DockerEngine,
    store: ConversationStore,
    *,
    conversation_store: ConversationStore | str | None = None,
    size: int,
    image: str,
    security: ContainerSecurity,
    environment: Mapping[str, str],
    labels: Mapping[str, str],
    conversations_root: str,
    ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
) -> DockerPool:
    """The process's pool for this engine, store and pool key (made and started on first use;
    it has its own engine client, and its own store when the runtime was given a URL
    (``conversation_store``: :func:`~skillruntime.core.conversations.pools.pool_store`), so it
    outlives the runtimes that use it)."""
    store_identity, open_store = pool_store(conversation_store, store)
    key = docker_pool_key(
        image=image,
        security=security,
        environment=environment,
        labels=labels,
        conversations_root=conversations_root,
    )

    def make() -> DockerPool:
        pool_store_, owns = open_store()
        return DockerPool(
            DockerEngine(engine.address, request_timeout_seconds=60.0),
            pool_store_,
            size=size,
            image=image,
            security=security,
            environment=environment,
            labels=labels,
            conversations_root=conversations_root,
            ttl_seconds=ttl_seconds,
            owns_store=owns,
        )

    return shared_pool(("docker", engine.address, store_identity, key), make)
