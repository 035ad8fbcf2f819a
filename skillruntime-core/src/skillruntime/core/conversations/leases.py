"""Conversation leases: one writer per conversation across processes and nodes.

A workspace has no transactions, so two nodes running commands in one conversation at once can
corrupt it. A *lease* serialises them: the store keeps at most one live lease per lease key (a
conversation's storage key), held by an owner id until its expiry time. The store SPI
(:meth:`~skillruntime.core.conversations.ConversationStore.acquire_lease`, ``renew_lease``,
``release_lease``) is compare-and-set like the rest of the store:

* ``acquire_lease`` succeeds when no lease exists, the stored one has expired, was released, or is
  already held by the same owner; taking over an expired or released lease increments its
  ``token`` (a fencing counter), re-acquiring one's own keeps it.
* ``renew_lease`` and ``release_lease`` succeed only for the owner *and* token the caller holds,
  so a holder that lost its lease to a takeover can neither extend nor end the new holder's.

Expiry is judged with the clock of the process calling the store: keep node clocks in sync
(NTP) and the TTL well above their skew.

:class:`LeaseKeeper` is what runtimes use: it waits for the lease with a bound
(:class:`LeaseTimeoutError`), keeps it renewed from a background thread while work runs, and
reports a lost lease as :class:`LeaseLostError`. Its asyncio twin is
:class:`~skillruntime.core.conversations.async_leases.AsyncLeaseKeeper`; both follow the rules of
:class:`LeaseState`, written once here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from ..errors import SkillRuntimeError
from .spi import MAX_LEASE_OWNER, ConversationLease, ConversationStore

__all__ = [
    "DEFAULT_LEASE_TTL_SECONDS",
    "DEFAULT_LEASE_WAIT_SECONDS",
    "ConversationLease",
    "ConversationLeaseError",
    "LeaseKeeper",
    "LeaseKeeperBase",
    "LeaseLostError",
    "LeaseState",
    "LeaseTimeoutError",
    "default_lease_owner",
]

logger = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_SECONDS = 30.0
"""How long a lease lives without renewal (the holder renews it every third of that)."""

DEFAULT_LEASE_WAIT_SECONDS = 60.0
"""How long an exclusive runtime waits for a conversation's lease before giving up."""


class ConversationLeaseError(SkillRuntimeError):
    """A conversation lease could not be taken or was lost."""


class LeaseTimeoutError(ConversationLeaseError):
    """Another owner held the conversation's lease for the whole wait bound."""


class LeaseLostError(ConversationLeaseError):
    """The lease was taken over or could not be renewed in time; stop writing the conversation."""


def default_lease_owner() -> str:
    """A fresh owner id naming this host and process (unique per call)."""
    host = socket.gethostname()[:100] or "host"
    return f"{host}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def check_lease_arguments(lease_key: str, owner: str, ttl_seconds: float) -> None:
    """Refuse unusable lease arguments before any store call (shared by every store)."""
    if not lease_key or len(lease_key) > 64:
        raise ValueError("a lease key must be 1-64 characters")
    if not owner or len(owner) > MAX_LEASE_OWNER:
        raise ValueError(f"a lease owner must be 1-{MAX_LEASE_OWNER} characters")
    if not ttl_seconds > 0 or ttl_seconds > 86400:
        raise ValueError("a lease TTL must be more than 0 and at most 86400 seconds")


def lease_expiry(ttl_seconds: float, now: datetime | None = None) -> datetime:
    """The expiry of a lease taken or renewed at ``now`` for ``ttl_seconds``."""
    return (now or datetime.now(UTC)) + timedelta(seconds=ttl_seconds)


class LeaseState:
    """The rules of holding one lease, without store calls, threads or tasks.

    Shared by :class:`LeaseKeeper` (threads) and
    :class:`~skillruntime.core.conversations.async_leases.AsyncLeaseKeeper` (asyncio), which
    only differ in how they wait, call the store and run the renewer. It validates the
    arguments, names each outermost hold's owner, schedules the bounded wait, counts the lease's
    validity with a monotonic clock from the moment each acquire or renewal was *sent*, judges
    renewal outcomes and words the typed errors. Not thread-safe: the sync keeper guards it with
    its lock, the async one uses it from the event loop only.
    """

    def __init__(
        self,
        lease_key: str,
        *,
        owner: str | None,
        ttl_seconds: float,
        wait_seconds: float,
        renew_every_seconds: float | None,
        description: str,
    ) -> None:
        self.owner = owner or default_lease_owner()
        check_lease_arguments(lease_key, self.owner, ttl_seconds)
        if len(self.owner) > MAX_LEASE_OWNER - 16:
            raise ValueError(f"a lease owner must be at most {MAX_LEASE_OWNER - 16} characters")
        if wait_seconds < 0:
            raise ValueError("wait_seconds must not be negative")
        renew = renew_every_seconds if renew_every_seconds is not None else ttl_seconds / 3
        if not 0 < renew < ttl_seconds:
            raise ValueError("renew_every_seconds must be positive and below ttl_seconds")
        self.lease_key = lease_key
        self.ttl_seconds = ttl_seconds
        self.wait_seconds = wait_seconds
        self.renew_every_seconds = renew
        self.description = description
        self.depth = 0
        self.lease: ConversationLease | None = None
        self.valid_until = 0.0  # monotonic
        self.lost: str | None = None
        self._cycles = 0

    def within(self) -> bool:
        """Whether the validity counted from the last acquire or renewal has not run out."""
        return time.monotonic() < self.valid_until

    @property
    def held(self) -> bool:
        """Whether the lease is held, not lost and within its validity."""
        return self.lease is not None and self.lost is None and self.within()

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the lease is not (or no longer) held."""
        if self.lost is not None:
            raise LeaseLostError(self.lost)
        if self.lease is None:
            raise LeaseLostError(f"the lease of {self.description} is not held")
        if not self.within():
            self.lost = self.lost_text("it expired before it could be renewed")
            raise LeaseLostError(self.lost)

    def lost_text(self, why: str) -> str:
        """The message of :class:`LeaseLostError` for a lease lost because of ``why``."""
        return (
            f"the lease of {self.description} was lost ({why}); another owner may be writing "
            "it, so no further operation runs"
        )

    def next_owner(self) -> str:
        """The owner id of the next outermost hold.

        Each outermost hold is its own owner (``<owner>#<n>``), so the release that ends one
        hold can never end the next one taken meanwhile by another thread or task of the keeper.
        """
        self._cycles += 1
        return f"{self.owner}#{self._cycles}"

    def pauses(self) -> Iterator[float]:
        """The pauses between acquire attempts of one wait, bounded by ``wait_seconds``.

        Jittered exponential backoff from 5 ms up to 250 ms; when the bound has passed the
        iterator raises :class:`LeaseTimeoutError` instead of yielding.
        """
        return self._pauses(time.monotonic() + self.wait_seconds)

    def _pauses(self, deadline: float) -> Iterator[float]:
        pause = 0.005
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LeaseTimeoutError(
                    f"{self.description} is leased by another owner; waited "
                    f"{self.wait_seconds:g}s for it"
                )
            yield min(remaining, random.uniform(pause / 2, pause))  # noqa: S311
            pause = min(pause * 2, 0.25)

    def install(self, lease: ConversationLease, sent: float) -> None:
        """Make ``lease`` (requested at monotonic ``sent``) the held one."""
        self.lease = lease
        self.valid_until = sent + self.ttl_seconds
        self.lost = None
        logger.debug("took the lease of %s (token %d)", self.description, lease.token)

    def to_renew(self, token: int) -> ConversationLease | None:
        """The lease a renewer of ``token`` should renew now, or ``None`` when it should stop."""
        lease = self.lease
        if lease is None or lease.token != token or self.lost is not None:
            return None
        return lease

    def renewal_failed(self, error: BaseException) -> bool:
        """Note a renewal the store could not answer; ``True`` when the lease is now lost."""
        logger.warning(
            "renewing the lease of %s failed (%s); retrying",
            self.description,
            type(error).__name__,
        )
        if self.within():
            return False
        self.lost = self.lost_text("the store could not be reached in time")
        return True

    def renewal_answered(self, renewed: ConversationLease | None, sent: float) -> bool:
        """Apply the store's answer to a renewal sent at ``sent``; ``True`` to keep renewing."""
        if renewed is None:
            self.lost = self.lost_text("another owner took it over")
            logger.warning("the lease of %s was taken over", self.description)
            return False
        if not self.within():
            self.lost = self.lost_text("it expired before it could be renewed")
            return False
        self.lease = renewed
        self.valid_until = sent + self.ttl_seconds
        return True

    def end(self) -> tuple[ConversationLease | None, bool]:
        """Forget the lease at the end of the outermost hold: it and whether to release it."""
        lease, self.lease = self.lease, None
        return lease, self.lost is None


class LeaseKeeperBase:
    """The settings and the lease state both keepers hold: :class:`LeaseKeeper` (threads) and
    :class:`~.async_leases.AsyncLeaseKeeper` (asyncio); the rules are :class:`LeaseState`'s."""

    def __init__(
        self,
        store: ConversationStore,
        lease_key: str,
        *,
        owner: str | None = None,
        ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        renew_every_seconds: float | None = None,
        description: str = "conversation",
    ) -> None:
        self._state = LeaseState(
            lease_key,
            owner=owner,
            ttl_seconds=ttl_seconds,
            wait_seconds=wait_seconds,
            renew_every_seconds=renew_every_seconds,
            description=description,
        )
        self.owner = self._state.owner
        self.store = store
        self.lease_key = lease_key
        self.ttl_seconds = ttl_seconds
        self.wait_seconds = wait_seconds
        self.renew_every_seconds = self._state.renew_every_seconds
        self._start()

    def _start(self) -> None:
        """Set up the keeper's own concurrency state (locks, stop signal, renewer slot)."""
        raise NotImplementedError

    @property
    def lease(self) -> ConversationLease | None:
        """The lease as last acquired or renewed (``None`` while not held)."""
        return self._state.lease


class LeaseKeeper(LeaseKeeperBase):
    """Takes, renews and releases one conversation lease for one owner.

    :meth:`hold` is re-entrant: the outermost ``with keeper.hold():`` waits up to
    ``wait_seconds`` for the lease (:class:`LeaseTimeoutError`), starts a renewer thread that
    renews it every ``renew_every_seconds`` (default a third of ``ttl_seconds``), and releases
    it at the end. Inner holds only check it. A renewal that the store refuses (taken over) or
    that does not succeed before the lease would expire marks the lease lost: :meth:`check`,
    the next :meth:`hold` in the same outermost hold, and the end of that hold raise
    :class:`LeaseLostError`. The keeper counts validity with a monotonic clock from the moment
    each acquire or renewal was *sent*, so a slow store answer shortens, never extends, it
    (the rules are :class:`LeaseState`'s).

    Thread-safe; holds from several threads of one keeper share the lease.
    """

    def _start(self) -> None:
        self._lock = threading.RLock()
        self._entry = threading.RLock()  # serialises outermost holds while they wait
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Whether the lease is held, not lost and within its validity."""
        with self._lock:
            return self._state.held

    @contextlib.contextmanager
    def hold(self) -> Iterator[ConversationLease]:
        """Hold the lease for the block (see the class docs)."""
        state = self._state
        with self._entry:
            with self._lock:
                if state.depth > 0:
                    state.check()
                    state.depth += 1
                    outer = False
                else:
                    outer = True
            if outer:
                # No lock but the entry lock while waiting: a finishing hold can release.
                taken, sent = self._take()
                with self._lock:
                    state.install(taken, sent)
                    self._start_renewer(taken.token)
                    state.depth += 1
        failed = False
        try:
            lease = state.lease
            assert lease is not None
            yield lease
        except BaseException:
            failed = True
            raise
        finally:
            with self._lock:
                state.depth -= 1
                lost = state.lost
                ending = self._end() if state.depth == 0 else None
            if ending is not None:
                self._finish(*ending)
            if lost is not None and not failed:
                raise LeaseLostError(lost)

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the lease is not (or no longer) held."""
        with self._lock:
            self._state.check()

    def _take(self) -> tuple[ConversationLease, float]:
        """Wait for the lease (bounded); returns it and the monotonic time its request left."""
        owner = self._state.next_owner()
        pauses = self._state.pauses()
        while True:
            sent = time.monotonic()
            lease = self.store.acquire_lease(self.lease_key, owner, self.ttl_seconds)
            if lease is not None:
                return lease, sent
            time.sleep(next(pauses))

    def _start_renewer(self, token: int) -> None:
        """Under the lock: start the renewer of the lease just installed."""
        self._stop = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew_loop,
            args=(self._stop, token),
            name=f"lease-renewer-{self.lease_key[:8]}",
            daemon=True,
        )
        self._renewer.start()

    def _end(self) -> tuple[ConversationLease | None, threading.Thread | None, bool]:
        """Under the lock: forget the lease and stop the renewer (joined by :meth:`_finish`)."""
        lease, release = self._state.end()
        self._stop.set()
        renewer, self._renewer = self._renewer, None
        return lease, renewer, release

    def _finish(
        self, lease: ConversationLease | None, renewer: threading.Thread | None, release: bool
    ) -> None:
        """Outside the lock: wait for the renewer, then release the lease in the store."""
        if renewer is not None and renewer is not threading.current_thread():
            renewer.join(timeout=self.ttl_seconds)
        if lease is None or not release:
            return
        try:
            self.store.release_lease(lease)
        except Exception:
            # The lease then expires after its TTL; nothing else is harmed.
            logger.warning(
                "releasing the lease of %s failed", self._state.description, exc_info=True
            )

    def _renew_loop(self, stop: threading.Event, token: int) -> None:
        state = self._state
        while not stop.wait(self.renew_every_seconds):
            with self._lock:
                lease = state.to_renew(token)
            if lease is None:
                return
            sent = time.monotonic()
            try:
                renewed = self.store.renew_lease(lease, self.ttl_seconds)
            except Exception as error:
                with self._lock:
                    if state.renewal_failed(error):
                        return
                continue
            with self._lock:
                if stop.is_set() or not state.renewal_answered(renewed, sent):
                    return
