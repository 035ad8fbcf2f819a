"""The pool kit on the OpenSandbox warm pool against the protocol double: claims, races, TTL and
clean-up with sandboxes and their metadata (docs/custom-runtime.md, "Warm pools")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from opensandbox.transport import RetryPolicy

from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY, OpenSandboxDouble
from skillruntime.core.conversations.memory import InMemoryConversationStore
from skillruntime.core.conversations.pools import WarmPool
from skillruntime.core.testing import PoolConformance
from skillruntime.opensandbox._tls import connection_config
from skillruntime.opensandbox.options import DEFAULT_IMAGE
from skillruntime.opensandbox.pool import OpenSandboxPool
from skillruntime.opensandbox.sandbox import SandboxSettings

# A double of its own: other modules move the shared one's clock by hours, and a renewal
# (now + timeout on the client's clock) would then lie in the server's past.
opensandbox_double = opensandbox_double_fixture(scope="module", tail_delay=SCALED_TAIL_DELAY)


class TestOpenSandboxPool(PoolConformance):
    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double

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
        config = connection_config(
            domain=self.double.domain,
            api_key=self.double.api_key,
            protocol="http",
            request_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy.disabled(),
            disable_metrics=True,
        )
        pool = OpenSandboxPool(
            config,
            SandboxSettings(image=DEFAULT_IMAGE, metadata=dict(tags), retry_seconds=5.0),
            store,
            size=size,
            conversations_root="/workspace/conversations",
            ttl_seconds=ttl_seconds,
            claim_ttl_seconds=claim_ttl_seconds,
            refill_delay_seconds=0.1,
        )
        pool.clock = clock
        return pool

    def sandbox_exists(self, sandbox_id: str) -> bool:
        return any(
            found.get("id") == sandbox_id and str(found.get("state", "")).lower() == "running"
            for found in self.double.sandboxes()
        )

    def vanish(self, sandbox_id: str) -> None:
        # Gone behind the pool's back, as an expiry or an eviction removes it.
        self.double.kill_behind_back(sandbox_id)
