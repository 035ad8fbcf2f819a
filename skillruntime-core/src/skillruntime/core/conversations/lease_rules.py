"""The rules of conversation leases, written once for the sync and the async keeper.

Everything here is sans-I/O: no store call, thread, task or sleep. It holds the settings' checks
(:func:`check_lease_arguments`, shared by every store), the expiry a store writes
(:func:`lease_expiry`), the typed errors, the owner ids and :class:`LeaseState`, the rules of
holding one lease. :class:`~skillruntime.core.conversations.leases.LeaseKeeper` (threads) and
:class:`~skillruntime.core.conversations.async_leases.AsyncLeaseKeeper` (asyncio) add only how
they wait, call the store and run the renewer; the semantics of leases are told in
:mod:`skillruntime.core.conversations.leases`.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from ..errors import (
    ConversationLeaseError,
    LeaseFencingError,
    LeaseLostError,
    LeaseTimeoutError,
)
from .spi import MAX_LEASE_OWNER, ConversationLease, ConversationStore

__all__ = [
    "DEFAULT_LEASE_TTL_SECONDS",
    "DEFAULT_LEASE_WAIT_SECONDS",
    "ConversationLeaseError",
    "LeaseFencingError",
    "LeaseKeeperBase",
    "LeaseLostError",
    "LeaseState",
    "LeaseTimeoutError",
    "check_lease_arguments",
    "default_lease_owner",
    "is_takeover",
    "lease_expiry",
]

# The logger the keepers have always written to (the module they are used from).
logger = logging.getLogger("skillruntime.core.conversations.leases")

DEFAULT_LEASE_TTL_SECONDS = 30.0
"""How long a lease lives without renewal (the holder renews it every third of that)."""

DEFAULT_LEASE_WAIT_SECONDS = 60.0
"""How long an exclusive runtime waits for a conversation's lease before giving up."""


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


def is_takeover(
    prior: ConversationLease | None, taken: ConversationLease, now: datetime | None = None
) -> bool:
    """Whether ``taken`` (what an acquire returned) was taken over from a holder that did not
    release it, given ``prior``, the lease as read just before that acquire was sent.

    A takeover is a grown token over a stored lease that had an owner, not ``taken``'s, and had
    expired by ``now`` (just after the acquire answered): that holder may have died with commands
    still running, which the new holder must stop first (docs/conversation-stores.md, "Nodes
    dying"). Taking a free or released lease is not one, nor is re-acquiring one's own. When the
    token grew by more than one step since ``prior`` was read, another owner held it in between,
    unseen: that counts as a takeover (a needless fence costs one command, a missed one overlaps
    two).
    """
    if prior is None:
        return taken.token > 1
    if taken.token <= prior.token:
        return False
    if taken.token > prior.token + 1:
        return True
    if prior.owner is None or prior.owner == taken.owner:
        return False
    return prior.expires_at <= (now or datetime.now(UTC))


class LeaseState:
    """The rules of holding one lease, without store calls, threads or tasks.

    Shared by :class:`~skillruntime.core.conversations.leases.LeaseKeeper` (threads) and
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
        self.unfenced: int | None = None
        """While the held lease was taken over and its fence has not run yet: the token the
        previous holder had (its commands carry fences below the held token)."""
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

    def enter(self) -> bool:
        """Count a hold that begins: ``True`` for an inner hold (counted once :meth:`check`
        passed, which raises :class:`LeaseLostError` when the lease is not held), ``False`` for
        the outermost hold, which takes the lease and then calls :meth:`begin`."""
        if self.depth == 0:
            return False
        self.check()
        self.depth += 1
        return True

    def begin(self, lease: ConversationLease, sent: float, prior: ConversationLease | None) -> None:
        """The outermost hold took ``lease`` (requested at monotonic ``sent``; ``prior`` is the
        stored lease as read just before): install it, note whether it was a takeover
        (:func:`is_takeover`, then :attr:`unfenced` is set until :meth:`fenced`) and count the
        hold."""
        self.install(lease, sent)
        self.unfenced = None
        if is_takeover(prior, lease):
            self.unfenced = prior.token if prior is not None else lease.token - 1
            logger.info(
                "took the lease of %s over from a holder that did not release it (token %d -> %d)",
                self.description,
                self.unfenced,
                lease.token,
            )
        self.depth += 1

    def fenced(self) -> None:
        """The commands of the previous holder are stopped: the lease is used normally."""
        self.unfenced = None

    def abandon(self, why: str) -> None:
        """Give the held lease up unused: it is lost (no further operation of this hold runs,
        the renewer stops) and not released, so it expires and the next taker takes it over."""
        self.lost = self.lost_text(why)

    def leave(self) -> tuple[str | None, tuple[ConversationLease | None, bool] | None]:
        """Count a hold that ends: the text of the lease's loss (``None`` unless lost) and, at
        the end of the outermost hold, what :meth:`end` gives (the lease, whether to release
        it); the hold then raises :class:`LeaseLostError` with that text unless its block
        raised."""
        self.depth -= 1
        return self.lost, (self.end() if self.depth == 0 else None)

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
        self.unfenced = None
        return lease, self.lost is None


class LeaseKeeperBase:
    """The settings and the lease state both keepers hold: :class:`~.leases.LeaseKeeper`
    (threads) and :class:`~.async_leases.AsyncLeaseKeeper` (asyncio); the rules are
    :class:`LeaseState`'s."""

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

    @property
    def takeover(self) -> int | None:
        """While the held lease was taken over from a holder that did not release it and is
        not yet fenced: that holder's token (see :func:`is_takeover`); else ``None``."""
        return self._state.unfenced if self._state.lease is not None else None

    def fenced(self) -> None:
        """Note that the previous holder's commands are stopped (clears :attr:`takeover`)."""
        self._state.fenced()

    def abandon(self, why: str) -> None:
        """Give the held lease up unused (see :meth:`LeaseState.abandon`)."""
        self._state.abandon(why)
