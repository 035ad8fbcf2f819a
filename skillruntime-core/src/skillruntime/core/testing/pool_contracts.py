"""``PoolConformance``: prove a platform's warm pool (a
:class:`~skillruntime.core.conversations.pools.WarmPool` over its
:class:`~skillruntime.core.conversations.pools.PoolDriver`) with a few lines of pytest.

.. code-block:: python

    from skillruntime.core.testing import PoolConformance

    class TestMyPool(PoolConformance):
        def make_pool(self, store, *, size, tags, ttl_seconds, claim_ttl_seconds, clock):
            return WarmPool(MyPoolDriver(), store, size=size, key=pool_key({"run": tags}),
                            tags=tags, ttl_seconds=ttl_seconds,
                            claim_ttl_seconds=claim_ttl_seconds, clock=clock)

        def sandbox_exists(self, sandbox_id):
            return my_platform.is_running(sandbox_id)

        def vanish(self, sandbox_id):
            my_platform.delete_behind_the_pools_back(sandbox_id)

Each test has its own deployment tags (a fresh run id, so runs in parallel never meet), one
in-memory conversation store that its *nodes* share (several pool objects, as several processes
would hold), and a clock it can move (member ages). Every pool is closed afterwards and every
member a test claimed is removed. ``docs/custom-runtime.md`` ("Warm pools") lists the contracts.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest

from ..conversations.binding import ConversationBinding
from ..conversations.memory import InMemoryConversationStore
from ..conversations.pools import WarmPool
from ..conversations.sandboxes import PooledSandbox

__all__ = ["PoolConformance", "PoolWorld"]

_TTL_SECONDS = 600.0


class PoolWorld:
    """One test's deployment: tags, the shared store, a movable clock, and the pools made."""

    def __init__(self, suite: PoolConformance) -> None:
        self.suite = suite
        self.tags: dict[str, str] = {
            **suite.deployment_tags,
            "skillruntime-kit-run": uuid.uuid4().hex[:12],
        }
        self.store = InMemoryConversationStore()
        self.offset = 0.0
        self.pools: list[WarmPool[Any]] = []
        self.claimed: list[tuple[WarmPool[Any], PooledSandbox[Any]]] = []

    def clock(self) -> float:
        """Epoch seconds, moved on by :meth:`advance`."""
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the clock on (every pool of the world sees it) and wake the pools."""
        self.offset += seconds
        for pool in self.pools:
            pool.wake()

    def pool(
        self, size: int, *, start: bool = True, claim_ttl_seconds: float = 120.0
    ) -> WarmPool[Any]:
        """A new node's pool of ``size`` members (started unless ``start`` is false)."""
        pool = self.suite.make_pool(
            self.store,
            size=size,
            tags=dict(self.tags),
            ttl_seconds=_TTL_SECONDS,
            claim_ttl_seconds=claim_ttl_seconds,
            clock=self.clock,
        )
        self.pools.append(pool)
        if start:
            pool.start()
        return pool

    def ready(self, pool: WarmPool[Any], count: int | None = None) -> None:
        """Wait for ``pool``'s members (the kit's budget: :attr:`PoolConformance.ready_seconds`)."""
        assert pool.wait_ready(count, timeout=self.suite.ready_seconds), (
            f"the pool made {pool.ready} of {pool.size if count is None else count} members "
            f"within {self.suite.ready_seconds:.0f} s ({pool.failures} creates failed)"
        )

    def claim(self, pool: WarmPool[Any], owner: str | None = None) -> PooledSandbox[Any] | None:
        """``pool.claim(owner)`` (default: a new owner, as a new conversation is), remembered
        for the clean-up."""
        claimed = pool.claim(owner or f"kit-owner-{uuid.uuid4().hex[:12]}")
        if claimed is not None:
            self.claimed.append((pool, claimed))
        return claimed

    def close(self) -> None:
        """Close every pool, then remove every member a test claimed."""
        for pool in self.pools:
            pool.close()
        for _, claimed in self.claimed:
            self.suite.cleanup(claimed)


def _race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` in threads released together; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = calls[index]()
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def _poll(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class PoolConformance:
    """Subclass it as ``Test<YourPool>`` and implement :meth:`make_pool`,
    :meth:`sandbox_exists` and :meth:`vanish`; see the module docs."""

    deployment_tags: ClassVar[Mapping[str, str]] = {"skillruntime-kit": "pool"}
    """Tags of the deployment (every member carries them)."""
    ready_seconds: ClassVar[float] = 60.0
    """How long the kit waits for a pool's members to be made."""

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
        """A pool of ``size`` members carrying ``tags`` (its deployment's; the pool key must
        depend on them), claims leased in ``store``, ages measured with ``clock``; not started
        (the kit starts it)."""
        raise NotImplementedError

    def sandbox_exists(self, sandbox_id: str) -> bool:
        """Whether the platform still runs ``sandbox_id``."""
        raise NotImplementedError

    def vanish(self, sandbox_id: str) -> None:
        """Make ``sandbox_id`` disappear behind the pool's back (its platform removed it, and
        its storage); one already gone is no error."""
        raise NotImplementedError

    def cleanup(self, claimed: PooledSandbox[Any]) -> None:
        """Remove a member a test claimed (after each test, its pools closed; default
        :meth:`vanish`, which must remove the member's storage too)."""
        self.vanish(claimed.sandbox_id)

    @pytest.fixture
    def pools(self) -> Iterator[PoolWorld]:
        """A fresh deployment for one test, cleaned up afterwards."""
        world = PoolWorld(self)
        try:
            yield world
        finally:
            world.close()

    # ---------------------------------------------------------------- claims

    def test_a_ready_member_is_claimed_live_and_the_pool_refills(self, pools: PoolWorld) -> None:
        pool = pools.pool(1)
        pools.ready(pool)
        claimed = pools.claim(pool)
        assert claimed is not None, "a ready member is handed out"
        assert self.sandbox_exists(claimed.sandbox_id), "the member handed out runs"
        assert (pool.hits, pool.misses) == (1, 0)
        pool.recorded(claimed)
        pools.ready(pool)
        again = pools.claim(pool)
        assert again is not None, "the pool made a new member after the claim"
        assert again.sandbox_id != claimed.sandbox_id, "a recorded member is not handed out again"

    def test_racing_nodes_never_claim_one_member(self, pools: PoolWorld) -> None:
        maker = pools.pool(2)
        other = pools.pool(0)  # makes none: claims what the first node made
        pools.ready(maker)
        won = _race(
            [
                lambda: pools.claim(maker),
                lambda: pools.claim(maker),
                lambda: pools.claim(other),
                lambda: pools.claim(other),
            ]
        )
        ids = [claimed.sandbox_id for claimed in won if claimed is not None]
        assert len(ids) >= 2, "both ready members were claimed by someone"
        assert len(set(ids)) == len(ids), f"one member was claimed twice: {ids}"

    def test_a_recorded_member_is_never_handed_out_again(self, pools: PoolWorld) -> None:
        maker = pools.pool(1, claim_ttl_seconds=0.5)
        pools.ready(maker)
        claimed = pools.claim(maker)
        assert claimed is not None
        maker.recorded(claimed)
        maker.close()
        other = pools.pool(0, claim_ttl_seconds=0.5)
        time.sleep(0.6)  # past the claim lease's own TTL: only the recorded extension holds
        assert pools.claim(other) is None, "a recorded member is never offered again"
        assert self.sandbox_exists(claimed.sandbox_id), "closing a pool keeps claimed members"

    def test_a_member_given_back_is_claimable_again(self, pools: PoolWorld) -> None:
        pool = pools.pool(1)
        pools.ready(pool)
        claimed = pools.claim(pool)
        assert claimed is not None
        pool.give_back(claimed)
        again = pools.claim(pool)
        assert again is not None
        assert again.sandbox_id == claimed.sandbox_id, "the member given back comes first"

    def test_a_dead_claimers_member_returns_only_when_no_record_names_it(
        self, pools: PoolWorld
    ) -> None:
        maker = pools.pool(2, claim_ttl_seconds=0.5)
        pools.ready(maker, 2)
        lost = pools.claim(maker, "crashed-before-recording")
        named = pools.claim(maker, "crashed-after-recording")
        assert lost is not None
        assert named is not None
        binding = ConversationBinding(
            pools.store,
            service_key="pool-kit",
            conversation_id=f"kit-{uuid.uuid4().hex[:12]}",
            runtime_name="pool-kit",
            workspace_root="/conversations",
        )
        assert binding.create(named.sandbox_id, sandbox_storage=named.storage)
        maker.close()  # the claimer's process is gone: neither claim is settled
        other = pools.pool(0, claim_ttl_seconds=0.5)
        found: list[str] = []

        def claimed_again() -> bool:
            again = pools.claim(other)
            if again is not None:
                found.append(again.sandbox_id)
            return bool(found)

        assert _poll(claimed_again, 5.0), "a member whose claimer died unrecorded returns"
        assert found == [lost.sandbox_id], "only the member no record names is handed out"
        assert pools.claim(other) is None

    def test_a_vanished_member_is_not_handed_out(self, pools: PoolWorld) -> None:
        pool = pools.pool(1)
        pools.ready(pool)
        other = pools.pool(0)
        ids = [member.sandbox_id for member in pool.driver.list_members(pool.tags)]
        assert len(ids) == 1, "a ready member is listed by the pool's tags"
        self.vanish(ids[0])
        claimed = pools.claim(other) or pools.claim(pool)
        assert claimed is None or claimed.sandbox_id != ids[0], "a vanished member is skipped"

    # ---------------------------------------------------------------- ending

    def test_an_old_member_is_never_handed_out_and_is_removed(self, pools: PoolWorld) -> None:
        pool = pools.pool(1)
        pools.ready(pool)
        old = [member.sandbox_id for member in pool.driver.list_members(pool.tags)]
        assert len(old) == 1
        pools.advance(_TTL_SECONDS)
        assert _poll(lambda: not self.sandbox_exists(old[0]), self.ready_seconds), (
            "a member past its TTL is removed by its pool"
        )
        claimed = pools.claim(pool)
        assert claimed is None or claimed.sandbox_id != old[0]

    def test_close_removes_unclaimed_members_and_keeps_claimed_ones(self, pools: PoolWorld) -> None:
        pool = pools.pool(2)
        pools.ready(pool, 2)
        claimed = pools.claim(pool)
        assert claimed is not None
        pool.recorded(claimed)
        unclaimed = [
            member.sandbox_id
            for member in pool.driver.list_members(pool.tags)
            if member.sandbox_id != claimed.sandbox_id
        ]
        pool.close()
        assert unclaimed, "the pool listed its unclaimed members"
        assert not any(self.sandbox_exists(sandbox_id) for sandbox_id in unclaimed), (
            "closing a pool removes the members nobody claimed"
        )
        assert self.sandbox_exists(claimed.sandbox_id)
