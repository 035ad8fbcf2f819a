"""Warm pools: sandboxes created ahead so that a new conversation skips the cold create.

One implementation for every container platform, over a small :class:`PoolDriver` (create a
member, list members, connect to one, remove one). A :class:`WarmPool` keeps up to ``size``
started sandboxes ("members") of one deployment and sandbox configuration. Members carry the
tags ``skillruntime-role=pool`` and ``skillruntime-pool=<pool key>`` (the key is a hash of
everything that makes two members interchangeable: :func:`pool_key`), plus the deployment's own.
The core lifecycle (:class:`~.sandboxes.ConversationSandboxes`) claims a member for a new
conversation's first sandbox before it would create one; see ``docs/durability.md``, "Warm
starts".

* **Claim** (:meth:`WarmPool.claim`): a lease on a key derived from the member's id
  (:func:`pool_lease_key`) is taken in the conversation store
  (:meth:`~.spi.ConversationStore.acquire_lease`, atomic on every store), so two nodes never
  claim one member. The lifecycle then inserts the conversation's record naming the member (and
  its storage); :meth:`WarmPool.recorded` extends the lease for good, so the member is never
  handed out again. A member whose claim lease was taken before (a crashed claimer: lease taken,
  maybe no record) is claimable again once the lease expired, and only when no record names it.
  A claim finds the members this process made first, then those any node made (listed on the
  platform).
* **Refill** in the background: one daemon thread per pool (pools are process-wide, one per
  platform, store and pool key: :func:`shared_pool`), woken by every claim, waiting
  ``refill_delay_seconds`` after it so the claimer's first command does not compete with the
  create; it stops at :meth:`WarmPool.close` or at interpreter exit (:func:`close_pools`).
* **Reaping**: a member older than ``ttl_seconds`` minus a margin is never handed out; the pool
  removes such members of its own (under their lease, so no claimer gets one being removed), and
  a platform's sweep reaps the rest (Docker: :class:`skillruntime.docker.sweeping.DockerReaper`;
  OpenSandbox members expire on the server at their TTL). :meth:`WarmPool.close` removes the
  members this process made and nobody claimed.

Counters: :attr:`WarmPool.hits`, :attr:`WarmPool.misses`, :attr:`WarmPool.created`,
:attr:`WarmPool.failures`. The conformance kit's :mod:`skillruntime.core.testing.pool_contracts`
checks a platform's pool against these rules (``docs/custom-runtime.md``, "Warm pools").
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ..errors import SkillRuntimeError
from .sandboxes import TAG_ROLE, PooledSandbox, recorded_sandbox_ids, tags_match
from .spi import ConversationStore, open_conversation_store

__all__ = [
    "CLAIM_TTL_SECONDS",
    "DEFAULT_POOL_TTL_SECONDS",
    "RECORDED_TTL_SECONDS",
    "ROLE_POOL",
    "TAG_POOL",
    "PoolDriver",
    "PoolMember",
    "WarmPool",
    "close_pools",
    "pool_key",
    "pool_lease_key",
    "pool_store",
    "shared_pool",
]

logger = logging.getLogger(__name__)

H = TypeVar("H")

ROLE_POOL = "pool"
"""The ``skillruntime-role`` of a pool member."""
TAG_POOL = "skillruntime-pool"
"""The tag holding a member's pool key."""
DEFAULT_POOL_TTL_SECONDS = 3600.0
"""Age after which an unclaimed member is removed (by its pool and by the sweep)."""
DEFAULT_REFILL_DELAY_SECONDS = 1.0
"""How long the refill waits after a claim before creating a member (the claimer's first
command goes first)."""
CLAIM_TTL_SECONDS = 120.0
"""How long a claim lease holds before the record must name the member."""
RECORDED_TTL_SECONDS = 86400.0
"""A recorded member's claim lease (the longest a store keeps one): longer than any member is
handed out (``ttl_seconds`` is at most this), so a recorded member is never offered again."""
CLAIM_MARGIN_SECONDS = 60.0
"""A member is handed out only while younger than its TTL by this much (the sweep, or the
platform's own expiry, may take it afterwards)."""


def pool_lease_key(sandbox_id: str) -> str:
    """The 64-hex lease key under which the member ``sandbox_id`` is claimed."""
    return hashlib.sha256(f"skillruntime-pool\n{sandbox_id}".encode()).hexdigest()


def pool_key(settings: Mapping[str, Any]) -> str:
    """A hash of ``settings`` (everything that makes two members interchangeable: image,
    security, base environment, deployment tags, workspace root…; values as JSON or ``repr``)."""
    payload = json.dumps(settings, sort_keys=True, default=repr)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


@dataclass
class PoolMember:
    """A member as its platform knows it: id, its persistent storage (``None``: the sandbox's
    own file system), creation time (epoch seconds) and tags (as listed)."""

    sandbox_id: str
    storage: str | None
    born: float
    tags: Mapping[str, str] = field(default_factory=dict)


class PoolDriver(Protocol[H]):
    """What a container platform implements for :class:`WarmPool` (``H`` as in
    :class:`~.sandboxes.SandboxDriver`). Calls may raise the platform's error (a
    :class:`~skillruntime.core.errors.SkillRuntimeError`); the pool logs it and goes on."""

    def create_member(self, tags: Mapping[str, str]) -> PoolMember:
        """A new running sandbox carrying ``tags``, personalised for no conversation (the
        deployment's image, environment and tags; on its own storage where the platform keeps
        storage apart from the sandbox). A failed create leaves nothing behind."""
        ...

    def list_members(self, tags: Mapping[str, str]) -> Iterable[PoolMember]:
        """The running sandboxes the platform finds for ``tags`` (the pool checks every tag
        again), with their creation times."""
        ...

    def connect_member(self, member: PoolMember) -> H | None:
        """A live handle on ``member`` just claimed (renewed as the platform needs); ``None``
        when it is gone."""
        ...

    def remove_member(self, member: PoolMember) -> None:
        """Remove ``member`` and its storage; one already gone is no error."""
        ...

    def release(self, handle: H) -> None:
        """Close the local handle (the sandbox runs on); must not raise."""
        ...

    def close(self) -> None:
        """Close the driver's own clients (the pool outlives the runtimes that use it)."""
        ...


class WarmPool(Generic[H]):
    """Warm sandboxes of one deployment and configuration; see the module docs.

    Thread-safe. ``store`` holds the claim leases (the conversation store every node of the
    deployment shares). ``size`` members are kept ready; 0 keeps none (claims still find
    members other nodes made). ``key`` is the pool key (:func:`pool_key`), ``tags`` the
    deployment's tags every member carries (the pool adds its role and key). ``clock`` (epoch
    seconds) is what member ages are measured with; ``claim_ttl_seconds`` how long a claim
    holds before the record must name the member. ``owns_store``: :meth:`close` closes
    ``store`` too (one the pool opened from a URL: :func:`pool_store`).
    """

    def __init__(
        self,
        driver: PoolDriver[H],
        store: ConversationStore,
        *,
        size: int,
        key: str,
        tags: Mapping[str, str],
        ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
        refill_delay_seconds: float = DEFAULT_REFILL_DELAY_SECONDS,
        claim_ttl_seconds: float = CLAIM_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
        name: str = "pool",
        owns_store: bool = False,
    ) -> None:
        if size < 0:
            raise ValueError("pool_size must not be negative")
        if not CLAIM_MARGIN_SECONDS < ttl_seconds <= RECORDED_TTL_SECONDS:
            raise ValueError(
                f"pool_ttl_seconds must exceed {CLAIM_MARGIN_SECONDS:.0f} and be at most "
                f"{RECORDED_TTL_SECONDS:.0f}"
            )
        if claim_ttl_seconds <= 0:
            raise ValueError("claim_ttl_seconds must be positive")
        self.driver = driver
        self.store = store
        self.size = size
        self.key = key
        self.ttl_seconds = ttl_seconds
        self.refill_delay_seconds = refill_delay_seconds
        self.claim_ttl_seconds = claim_ttl_seconds
        self.clock = clock
        self.name = name
        self._owns_store = owns_store
        self.tags: dict[str, str] = {**tags, TAG_ROLE: ROLE_POOL, TAG_POOL: key}
        """The tags of every member of this pool."""
        self.hits = 0
        self.misses = 0
        self.created = 0
        self.failures = 0
        self._claimed_at: float | None = None
        self._ready: collections.deque[PoolMember] = collections.deque()
        self._out: dict[str, PoolMember] = {}  # claimed here, not yet settled
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._owner = f"pool-{secrets.token_hex(8)}"
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the refill thread (idempotent; nothing when ``size`` is 0)."""
        with self._lock:
            if self._thread is not None or self._closed or self.size == 0:
                return
            self._thread = threading.Thread(
                target=self._refill, name=f"skillruntime-{self.name}-{self.key[:8]}", daemon=True
            )
            self._thread.start()

    def wait_ready(self, count: int | None = None, timeout: float = 60.0) -> bool:
        """Wait until ``count`` (default ``size``) members are ready; ``False`` at the timeout."""
        wanted = self.size if count is None else count
        deadline = time.monotonic() + timeout
        with self._wake:
            while len(self._ready) < wanted and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(left)
            return len(self._ready) >= wanted

    @property
    def ready(self) -> int:
        """How many members this process holds ready."""
        with self._lock:
            return len(self._ready)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        with self._lock:
            return self._closed

    def close(self) -> None:
        """Stop refilling and remove this process's unclaimed members (idempotent)."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            members = list(self._ready)
            self._ready.clear()
        for member in members:
            self._remove(member, claim=True)
        _forget(self)
        try:
            self.driver.close()
        except Exception:
            logger.warning("closing the %s driver failed", self.name, exc_info=True)
        if self._owns_store:
            self.store.close()

    # ----------------------------------------------------------------- claim

    def claim(self, owner: str) -> PooledSandbox[H] | None:
        """A member leased to ``owner`` (see the module docs), or ``None`` (a miss)."""
        while True:
            with self._wake:
                member = self._ready.popleft() if self._ready else None
                self._wake.notify_all()
            if member is None:
                break
            claimed = self._take(member, owner)
            if claimed is not None:
                return claimed
        for member in self._listed():
            claimed = self._take(member, owner)
            if claimed is not None:
                return claimed
        with self._wake:
            self.misses += 1
        return None

    def recorded(self, claimed: PooledSandbox[H]) -> None:
        """The record names ``claimed``: its claim lease is extended for good."""
        with self._lock:
            self._out.pop(claimed.sandbox_id, None)
        key = pool_lease_key(claimed.sandbox_id)
        try:
            lease = self.store.get_lease(key)
            kept = (
                lease is not None
                and lease.owner is not None
                and self.store.renew_lease(lease, RECORDED_TTL_SECONDS) is not None
            )
        except SkillRuntimeError:
            kept = False
        if not kept:
            logger.warning("the claim lease of member %s was lost", claimed.sandbox_id[:12])

    def give_back(self, claimed: PooledSandbox[H]) -> None:
        """``claimed`` was not recorded: its lease is released and it is ready again."""
        with self._lock:
            member = self._out.pop(claimed.sandbox_id, None)
        self.driver.release(claimed.handle)
        lease = self.store.get_lease(pool_lease_key(claimed.sandbox_id))
        if lease is not None and lease.owner is not None:
            self.store.release_lease(lease)
        if member is None:  # claimed through another pool object: found on the platform
            member = next(
                (found for found in self._listed() if found.sandbox_id == claimed.sandbox_id),
                None,
            )
            if member is None:
                return
        with self._wake:
            if self._closed:
                closed = True
            else:
                closed = False
                self._ready.appendleft(member)
                self._wake.notify_all()
        if closed:
            self._remove(member, claim=True)

    def _take(self, member: PoolMember, owner: str) -> PooledSandbox[H] | None:
        """Lease ``member`` to ``owner`` when it is young enough, unclaimed and unrecorded, and
        connect to it; ``None`` otherwise (a member found gone is forgotten)."""
        if self._too_old(member):
            return None
        key = pool_lease_key(member.sandbox_id)
        try:
            lease = self.store.acquire_lease(key, owner, self.claim_ttl_seconds)
        except SkillRuntimeError:
            logger.warning("claiming member %s failed", member.sandbox_id[:12], exc_info=True)
            return None
        if lease is None:
            return None
        if lease.token > 1:
            # Claimed before by someone who may have died after recording it.
            recorded = recorded_sandbox_ids(self.store)
            if recorded is None or member.sandbox_id in recorded:
                self.store.renew_lease(lease, RECORDED_TTL_SECONDS)
                return None
        try:
            handle = self.driver.connect_member(member)
        except Exception:
            logger.warning("connecting to member %s failed", member.sandbox_id[:12], exc_info=True)
            handle = None
        if handle is None:
            # Gone (or unreachable): never offered again by this claim; the lease runs out.
            return None
        with self._wake:
            self._out[member.sandbox_id] = member
            self.hits += 1
            self._claimed_at = time.monotonic()
            self._wake.notify_all()
        return PooledSandbox(handle, member.sandbox_id, member.storage)

    def _listed(self) -> list[PoolMember]:
        """Members on the platform (made by any node), oldest first."""
        try:
            listed = list(self.driver.list_members(self.tags))
        except SkillRuntimeError:
            logger.warning("listing %s members failed", self.name, exc_info=True)
            return []
        members = [
            member
            for member in listed
            if member.sandbox_id
            and tags_match(member.tags, self.tags)
            and not self._too_old(member)
        ]
        return sorted(members, key=lambda member: member.born)

    # ---------------------------------------------------------------- refill

    def _refill(self) -> None:
        """The refill thread: keep ``size`` members ready, remove expired ones."""
        backoff = 1.0
        while True:
            with self._wake:
                while not self._closed and len(self._ready) >= self.size and not self._expired():
                    self._wake.wait(self._next_expiry())
                if self._closed:
                    return
                expired = [member for member in self._ready if self._too_old(member)]
                for member in expired:
                    self._ready.remove(member)
            for member in expired:
                self._remove(member, claim=True)
            with self._wake:
                missing = self.size - len(self._ready)
                if missing > 0 and self._claimed_at is not None:
                    # Let the claimer's first command go first: creating a sandbox competes
                    # with it for the platform (and the host's cores).
                    pause = self._claimed_at + self.refill_delay_seconds - time.monotonic()
                    if pause > 0:
                        self._wake.wait(pause)
                        continue
            if missing <= 0:
                continue
            try:
                member = self.driver.create_member(self.tags)
            except Exception:
                self.failures += 1
                logger.warning("creating a %s member failed", self.name, exc_info=True)
                with self._wake:
                    self._wake.wait(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            backoff = 1.0
            member.born = self.clock()  # ages are on the pool's clock from now on
            with self._wake:
                self.created += 1
                closed = self._closed
                if not closed:
                    self._ready.append(member)
                    self._wake.notify_all()
            logger.info("%s %s: member %s ready", self.name, self.key[:8], member.sandbox_id[:12])
            if closed:
                self._remove(member, claim=False)
                return

    def _too_old(self, member: PoolMember) -> bool:
        return self.clock() - member.born > self.ttl_seconds - CLAIM_MARGIN_SECONDS

    def _expired(self) -> bool:
        return any(self._too_old(member) for member in self._ready)

    def _next_expiry(self) -> float:
        if not self._ready:
            return 60.0
        oldest = min(member.born for member in self._ready)
        return max(1.0, oldest + self.ttl_seconds - CLAIM_MARGIN_SECONDS - self.clock())

    def wake(self) -> None:
        """Make the refill thread look again now (after the clock moved, in tests)."""
        with self._wake:
            self._wake.notify_all()

    def _remove(self, member: PoolMember, *, claim: bool) -> None:
        """Remove an unclaimed member (taking its lease first when ``claim``, so that no node
        claims it meanwhile; one another node holds is left to it)."""
        try:
            if claim:
                lease = self.store.acquire_lease(
                    pool_lease_key(member.sandbox_id), self._owner, RECORDED_TTL_SECONDS
                )
                if lease is None:
                    return
                if lease.token > 1:
                    recorded = recorded_sandbox_ids(self.store)
                    if recorded is None or member.sandbox_id in recorded:
                        return
            self.driver.remove_member(member)
        except SkillRuntimeError:
            logger.warning("removing member %s failed", member.sandbox_id[:12], exc_info=True)


def pool_store(
    conversation_store: ConversationStore | str | None, store: ConversationStore
) -> tuple[Hashable, Callable[[], tuple[ConversationStore, bool]]]:
    """How a runtime's pool reaches the conversation store: an identity for the registry key
    and an opener. A runtime given a URL opened its own store, which it closes with itself; its
    pool, which outlives it, opens one of its own from the URL (one per URL and process) and
    closes it with the pool. A runtime given a store object (or the default) shares it."""
    if isinstance(conversation_store, str):
        url = conversation_store
        return ("url", url), lambda: (open_conversation_store(url), True)
    return ("store", id(store)), lambda: (store, False)


_POOLS: dict[Hashable, WarmPool[Any]] = {}
_POOLS_LOCK = threading.Lock()

P = TypeVar("P", bound=WarmPool[Any])


def shared_pool(key: Hashable, make: Callable[[], P]) -> P:
    """The process's pool registered under ``key`` (a platform address, the store's identity
    and the pool key), made by ``make`` and started on first use."""
    with _POOLS_LOCK:
        found = _POOLS.get(key)
        if found is None or found.closed:
            found = make()
            _POOLS[key] = found
    found.start()
    return found  # type: ignore[return-value]


def _forget(pool: WarmPool[Any]) -> None:
    with _POOLS_LOCK:
        for key, value in list(_POOLS.items()):
            if value is pool:
                del _POOLS[key]


def close_pools() -> None:
    """Close every pool of the process (also run at interpreter exit)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    for pool in pools:
        pool.close()


atexit.register(close_pools)
