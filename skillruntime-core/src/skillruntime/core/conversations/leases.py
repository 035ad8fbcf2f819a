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
reports a lost lease as :class:`LeaseLostError`. It also tells a *takeover* (the lease taken
from a holder that expired without releasing it, :func:`~.lease_rules.is_takeover`) through
:attr:`LeaseKeeper.takeover`, so that the exclusive guard first stops what that holder left
running (:mod:`~skillruntime.core.conversations.fencing`). Its asyncio twin is
:class:`~skillruntime.core.conversations.async_leases.AsyncLeaseKeeper`; both follow the rules of
:class:`LeaseState`, written once and without I/O in
:mod:`skillruntime.core.conversations.lease_rules` (whose names this module exports too),
and differ only in how they wait, call the store and run the renewer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from .lease_rules import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
    ConversationLeaseError,
    LeaseFencingError,
    LeaseKeeperBase,
    LeaseLostError,
    LeaseState,
    LeaseTimeoutError,
    check_lease_arguments,  # noqa: F401  (importable from here, as before)
    default_lease_owner,
    lease_expiry,  # noqa: F401  (importable from here, as before)
)
from .spi import ConversationLease

__all__ = [
    "DEFAULT_LEASE_TTL_SECONDS",
    "DEFAULT_LEASE_WAIT_SECONDS",
    "ConversationLease",
    "ConversationLeaseError",
    "LeaseFencingError",
    "LeaseKeeper",
    "LeaseKeeperBase",
    "LeaseLostError",
    "LeaseState",
    "LeaseTimeoutError",
    "default_lease_owner",
]

logger = logging.getLogger(__name__)


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
                outer = not state.enter()
            if outer:
                # No lock but the entry lock while waiting: a finishing hold can release.
                taken, sent, prior = self._take()
                with self._lock:
                    state.begin(taken, sent, prior)
                    self._start_renewer(taken.token)
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
                lost, ending = state.leave()
                renewer = self._stop_renewer() if ending is not None else None
            if ending is not None:
                self._finish(ending[0], renewer, ending[1])
            if lost is not None and not failed:
                raise LeaseLostError(lost)

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the lease is not (or no longer) held."""
        with self._lock:
            self._state.check()

    @property
    def takeover(self) -> int | None:
        """While the held lease was taken over from a holder that did not release it and is
        not yet fenced: that holder's token (:func:`~.lease_rules.is_takeover`); else ``None``."""
        with self._lock:
            return self._state.unfenced if self._state.lease is not None else None

    def fenced(self) -> None:
        """Note that the previous holder's commands are stopped (clears :attr:`takeover`)."""
        with self._lock:
            self._state.fenced()

    def abandon(self, why: str) -> None:
        """Give the held lease up unused: lost, not released (see
        :meth:`~.lease_rules.LeaseState.abandon`)."""
        with self._lock:
            self._state.abandon(why)

    def _take(self) -> tuple[ConversationLease, float, ConversationLease | None]:
        """Wait for the lease (bounded); returns it, the monotonic time its request left and
        the stored lease as read just before that request (to judge a takeover)."""
        owner = self._state.next_owner()
        pauses = self._state.pauses()
        while True:
            prior = self.store.get_lease(self.lease_key)
            sent = time.monotonic()
            lease = self.store.acquire_lease(self.lease_key, owner, self.ttl_seconds)
            if lease is not None:
                return lease, sent, prior
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

    def _stop_renewer(self) -> threading.Thread | None:
        """Under the lock, once the lease is forgotten: signal the renewer to stop and return
        it (joined by :meth:`_finish`)."""
        self._stop.set()
        renewer, self._renewer = self._renewer, None
        return renewer

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
