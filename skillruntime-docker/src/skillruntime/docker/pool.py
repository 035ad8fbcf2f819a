"""Warm pools: containers created ahead so that a new conversation skips the cold create.

A :class:`DockerPool` keeps up to ``size`` started containers ("members") of one deployment
and image, each on its **own** volume ``skillruntime-pool-<random>`` mounted at
``conversations_root`` (mounts and labels are fixed at creation, so a member cannot be made on
a conversation's volume before the conversation exists). Members carry the labels
``skillruntime-role=pool``, ``skillruntime-pool=<pool key>`` (a hash of everything that makes
two containers interchangeable: image, security settings, base environment, deployment labels,
``conversations_root``) and ``skillruntime-volume=<their volume>``.

* **Claim** (:meth:`DockerPool.claim`): a lease on a key derived from the member's id is taken
  in the conversation store (:meth:`~skillruntime.core.conversations.ConversationStore.
  acquire_lease`, atomic on every store), so two nodes never claim one member. The core
  lifecycle then inserts the conversation's record naming the member and its volume
  (``sandbox_storage``); :meth:`DockerPool.recorded` extends the lease for good, so the member
  is never handed out again. A member whose claim lease was taken before (a crashed claimer:
  lease taken, maybe no record) is claimable again once the lease expired, and only when no
  record names it.
* **Refill** in the background: one daemon thread per pool (pools are process-wide, one per
  engine, store and pool key: :func:`docker_pool`), woken by every claim; it stops at
  :meth:`DockerPool.close` or at interpreter exit (:func:`close_pools`).
* **Reaping**: a member older than ``ttl_seconds`` is never handed out; the pool removes such
  members (under a lease, so no claimer gets one being removed), and so does the Docker sweep
  (:class:`.sweeping.DockerReaper`). :meth:`DockerPool.close` removes the unclaimed members.

Counters: :attr:`DockerPool.hits`, :attr:`DockerPool.misses`, :attr:`DockerPool.created`. See
``docs/docker-runtime.md``, "Warm pools", for the cost and the knobs.
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
from collections.abc import Mapping
from dataclasses import dataclass

from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.sandboxes import (
    TAG_ROLE,
    TAG_RUNTIME,
    PooledSandbox,
    recorded_sandbox_ids,
    tags_match,
)
from skillruntime.core.errors import SkillRuntimeError

from .engine import DockerEngine, parse_time
from .security import ContainerSecurity

__all__ = [
    "DEFAULT_POOL_TTL_SECONDS",
    "LABEL_POOL",
    "POOL_VOLUME_PREFIX",
    "ROLE_POOL",
    "DockerPool",
    "close_pools",
    "docker_pool",
    "member_labels",
    "pool_lease_key",
]

logger = logging.getLogger(__name__)

ROLE_POOL = "pool"
"""The ``skillruntime-role`` of a pool member (and its volume)."""
LABEL_POOL = "skillruntime-pool"
"""The label holding a member's pool key."""
LABEL_VOLUME = "skillruntime-volume"
POOL_VOLUME_PREFIX = "skillruntime-pool-"
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
_CLAIM_MARGIN_SECONDS = 60.0
"""A member is handed out only while younger than its TTL by this much (the sweep may take it
afterwards)."""


def pool_lease_key(container_id: str) -> str:
    """The 64-hex lease key under which a member is claimed."""
    return hashlib.sha256(f"skillruntime-pool\n{container_id}".encode()).hexdigest()


def member_labels(deployment: Mapping[str, str], volume: str | None = None) -> dict[str, str]:
    """The labels every member of ``deployment`` carries (``volume``: its own volume's)."""
    labels = {**deployment, TAG_RUNTIME: "docker", TAG_ROLE: ROLE_POOL}
    if volume is not None:
        labels[LABEL_VOLUME] = volume
    return labels


@dataclass
class _Member:
    container_id: str
    volume: str
    born: float
    """Epoch seconds of its creation."""


class DockerPool:
    """Warm containers of one deployment and image; see the module docs.

    Thread-safe. ``store`` holds the claim leases (the conversation store every node of the
    deployment shares). ``size`` members are kept ready; 0 keeps none (claims still find
    members other nodes made). A member is made ``refill_delay_seconds`` after the last claim
    at the earliest, so that the claimer's first command does not compete with the create.
    """

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
    ) -> None:
        if size < 0:
            raise ValueError("pool_size must not be negative")
        if not _CLAIM_MARGIN_SECONDS < ttl_seconds <= RECORDED_TTL_SECONDS:
            raise ValueError(
                f"pool_ttl_seconds must exceed {_CLAIM_MARGIN_SECONDS:.0f} and be at most "
                f"{RECORDED_TTL_SECONDS:.0f}"
            )
        self.engine = engine
        self.store = store
        self.size = size
        self.image = image
        self.security = security
        self.environment = dict(environment)
        self.deployment_labels = dict(labels)
        self.conversations_root = conversations_root
        self.ttl_seconds = ttl_seconds
        self.refill_delay_seconds = refill_delay_seconds
        self._claimed_at: float | None = None
        self.key = pool_key(
            image=image,
            security=security,
            environment=environment,
            labels=labels,
            conversations_root=conversations_root,
        )
        self.labels = {**member_labels(labels), LABEL_POOL: self.key}
        """The labels of every member of this pool (without its volume's)."""
        self.hits = 0
        self.misses = 0
        self.created = 0
        self.failures = 0
        self._ready: collections.deque[_Member] = collections.deque()
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
                target=self._refill, name=f"skillruntime-docker-pool-{self.key[:8]}", daemon=True
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

    # ----------------------------------------------------------------- claim

    def claim(self, owner: str) -> PooledSandbox[str] | None:
        """A member leased to ``owner`` (see the module docs), or ``None`` (a miss)."""
        while True:
            with self._wake:
                member = self._ready.popleft() if self._ready else None
                self._wake.notify_all()
            if member is None:
                break
            if self._take(member, owner):
                return self._hit(member)
        for member in self._listed():
            if self._take(member, owner):
                return self._hit(member)
        with self._wake:
            self.misses += 1
        return None

    def _hit(self, member: _Member) -> PooledSandbox[str]:
        with self._wake:
            self.hits += 1
            self._claimed_at = time.monotonic()
            self._wake.notify_all()
        return PooledSandbox(member.container_id, member.container_id, member.volume)

    def recorded(self, claimed: PooledSandbox[str]) -> None:
        """The record names ``claimed``: its claim lease is extended for good."""
        key = pool_lease_key(claimed.sandbox_id)
        lease = self.store.get_lease(key)
        if (
            lease is None
            or lease.owner is None
            or self.store.renew_lease(lease, RECORDED_TTL_SECONDS) is None
        ):
            logger.warning("the claim lease of member %s was lost", claimed.sandbox_id[:12])

    def give_back(self, claimed: PooledSandbox[str]) -> None:
        """``claimed`` was not recorded: its lease is released and it is ready again."""
        lease = self.store.get_lease(pool_lease_key(claimed.sandbox_id))
        if lease is not None and lease.owner is not None:
            self.store.release_lease(lease)
        info = self.engine.inspect(claimed.sandbox_id) or {}
        created = info.get("Created")
        born = parse_time(str(created)) if created else None
        member = _Member(
            claimed.sandbox_id,
            claimed.storage or "",
            born.timestamp() if born is not None else time.time(),
        )
        with self._wake:
            self._ready.appendleft(member)
            self._wake.notify_all()

    def _take(self, member: _Member, owner: str) -> bool:
        """Lease ``member`` to ``owner`` when it is young enough, unclaimed and unrecorded."""
        if time.time() - member.born > self.ttl_seconds - _CLAIM_MARGIN_SECONDS:
            return False
        try:
            lease = self.store.acquire_lease(
                pool_lease_key(member.container_id), owner, CLAIM_TTL_SECONDS
            )
        except SkillRuntimeError:
            logger.warning("claiming member %s failed", member.container_id[:12], exc_info=True)
            return False
        if lease is None:
            return False
        if lease.token > 1:
            # Claimed before by someone who may have died after recording it.
            recorded = recorded_sandbox_ids(self.store)
            if recorded is None or member.container_id in recorded:
                self.store.renew_lease(lease, RECORDED_TTL_SECONDS)
                return False
        return True

    def _listed(self) -> list[_Member]:
        """Members on the engine (made by any node), oldest first."""
        try:
            listed = self.engine.list_containers(self.labels)
        except SkillRuntimeError:
            logger.warning("listing pool members failed", exc_info=True)
            return []
        members = []
        for item in listed:
            labels = item.get("Labels") or {}
            volume = labels.get(LABEL_VOLUME, "")
            if not tags_match(labels, self.labels) or not volume.startswith(POOL_VOLUME_PREFIX):
                continue
            if item.get("State") != "running":
                continue
            created = float(item.get("Created") or 0)
            if time.time() - created > self.ttl_seconds - _CLAIM_MARGIN_SECONDS:
                continue  # too old to hand out (claimed ones in use end up here: no store call)
            members.append(_Member(str(item.get("Id", "")), volume, created))
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
                    # Let the claimer's first command go first: creating a container competes
                    # with it for the engine (and the host's cores).
                    pause = self._claimed_at + self.refill_delay_seconds - time.monotonic()
                    if pause > 0:
                        self._wake.wait(pause)
                        continue
            if missing <= 0:
                continue
            try:
                member = self._create()
            except Exception:
                self.failures += 1
                logger.warning("creating a pool member failed", exc_info=True)
                with self._wake:
                    self._wake.wait(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            backoff = 1.0
            with self._wake:
                if self._closed:
                    closed = True
                else:
                    closed = False
                    self._ready.append(member)
                    self._wake.notify_all()
            if closed:
                self._remove(member, claim=False)
                return

    def _too_old(self, member: _Member) -> bool:
        return time.time() - member.born > self.ttl_seconds - _CLAIM_MARGIN_SECONDS

    def _expired(self) -> bool:
        return any(self._too_old(member) for member in self._ready)

    def _next_expiry(self) -> float:
        if not self._ready:
            return 60.0
        oldest = min(member.born for member in self._ready)
        return max(1.0, oldest + self.ttl_seconds - _CLAIM_MARGIN_SECONDS - time.time())

    def _create(self) -> _Member:
        """A new member on its own new volume (the volume is removed when the container fails)."""
        volume = POOL_VOLUME_PREFIX + secrets.token_hex(16)
        labels = {**self.labels, LABEL_VOLUME: volume}
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
        self.created += 1
        logger.info("pool %s: member %s ready", self.key[:8], container_id[:12])
        return _Member(container_id, volume, time.time())

    def _remove(self, member: _Member, *, claim: bool) -> None:
        """Remove an unclaimed member and its volume (taking its lease first when ``claim``, so
        that no node claims it meanwhile; one another node holds is left to it)."""
        try:
            if claim:
                lease = self.store.acquire_lease(
                    pool_lease_key(member.container_id), self._owner, RECORDED_TTL_SECONDS
                )
                if lease is None:
                    return
                if lease.token > 1:
                    recorded = recorded_sandbox_ids(self.store)
                    if recorded is None or member.container_id in recorded:
                        return
            self.engine.remove_container(member.container_id)
            self.engine.remove_volume(member.volume)
        except SkillRuntimeError:
            logger.warning(
                "removing pool member %s failed", member.container_id[:12], exc_info=True
            )


def pool_key(
    *,
    image: str,
    security: ContainerSecurity,
    environment: Mapping[str, str],
    labels: Mapping[str, str],
    conversations_root: str,
) -> str:
    """A hash of everything that makes two members interchangeable."""
    payload = json.dumps(
        {
            "image": image,
            "security": repr(security),
            "environment": dict(sorted(environment.items())),
            "labels": dict(sorted(labels.items())),
            "conversations_root": conversations_root,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


_POOLS: dict[tuple[str, int, str], DockerPool] = {}
_POOLS_LOCK = threading.Lock()


def docker_pool(
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
) -> DockerPool:
    """The process's pool for this engine, store and pool key (made and started on first use;
    it has its own engine client, so it outlives the runtimes that use it)."""
    key = pool_key(
        image=image,
        security=security,
        environment=environment,
        labels=labels,
        conversations_root=conversations_root,
    )
    with _POOLS_LOCK:
        found = _POOLS.get((engine.address, id(store), key))
        if found is None:
            found = DockerPool(
                DockerEngine(engine.address, request_timeout_seconds=60.0),
                store,
                size=size,
                image=image,
                security=security,
                environment=environment,
                labels=labels,
                conversations_root=conversations_root,
                ttl_seconds=ttl_seconds,
            )
            _POOLS[(engine.address, id(store), key)] = found
    found.start()
    return found


def _forget(pool: DockerPool) -> None:
    with _POOLS_LOCK:
        for key, value in list(_POOLS.items()):
            if value is pool:
                del _POOLS[key]
    pool.engine.close()


def close_pools() -> None:
    """Close every pool of the process (also run at interpreter exit)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    for pool in pools:
        pool.close()


atexit.register(close_pools)
