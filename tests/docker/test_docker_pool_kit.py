"""The pool kit on the Docker warm pool against the real engine: claims, races, TTL and
clean-up with containers on their own volumes (docs/custom-runtime.md, "Warm pools")."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import docker.errors
import pytest

from docker_fixtures import IMAGE, ROOT, TEST_LABEL, engine_client
from skillruntime.core.conversations.memory import InMemoryConversationStore
from skillruntime.core.conversations.pools import WarmPool
from skillruntime.core.testing import PoolConformance
from skillruntime.docker.engine import DockerEngine
from skillruntime.docker.pool import LABEL_VOLUME, DockerPool
from skillruntime.docker.security import ContainerSecurity

pytestmark = pytest.mark.slow  # real containers

_RUN = f"pool-kit-{uuid.uuid4().hex[:8]}"


class TestDockerPool(PoolConformance):
    deployment_tags: ClassVar[Mapping[str, str]] = {TEST_LABEL: _RUN}

    def make_pool(
        self,
        store: InMemoryConversationStore,
        *,
        size: int,
        tags: Mapping[str, str],
        ttl_seconds: float,
        claim_ttl_seconds: float,
        clock: Callable[[], float],
    ) -> WarmPool[Any]:
        pool = DockerPool(
            DockerEngine(None),
            store,
            size=size,
            image=IMAGE,
            security=ContainerSecurity(),
            environment={},
            labels=tags,
            conversations_root=ROOT,
            ttl_seconds=ttl_seconds,
            claim_ttl_seconds=claim_ttl_seconds,
            refill_delay_seconds=0.1,
        )
        pool.clock = clock
        return pool

    def sandbox_exists(self, sandbox_id: str) -> bool:
        try:
            info = engine_client().api.inspect_container(sandbox_id)
        except docker.errors.NotFound:
            return False
        return bool(info["State"]["Running"])

    def vanish(self, sandbox_id: str) -> None:
        # Removed by someone else, through the engine, not the pool.
        api = engine_client().api
        try:
            volume = api.inspect_container(sandbox_id)["Config"]["Labels"].get(LABEL_VOLUME)
            api.remove_container(sandbox_id, force=True)
        except docker.errors.NotFound:
            return
        if volume:
            api.remove_volume(volume, force=True)
