"""The asyncio twin of :class:`~.leases.LeaseKeeper`: the same lease rules, never blocking the loop.

:class:`AsyncLeaseKeeper` follows :class:`~.lease_rules.LeaseState` (the sans-I/O rules) exactly
like the sync keeper (owner per outermost hold, bounded wait, validity counted from when each
request was sent, renewal outcomes, typed errors), and differs only in how it waits and calls
the store:

* the store SPI is synchronous, so every store call (acquire, renew, release) runs in a worker
  thread through :func:`asyncio.to_thread`; the wait between attempts is an
  :func:`asyncio.sleep` with the same jittered backoff;
* the renewer is an :class:`asyncio.Task` of the loop that holds the lease, running while the
  outermost hold's block runs;
* a task cancelled while its acquire request is in flight does not leak the lease: when the
  request does take it, it is released at once in the background.

Sync and async keepers of the same lease key exclude each other: they are just owners of one
lease in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from ..runtime.loop_local import LoopLocal
from .lease_rules import LeaseKeeperBase, LeaseLostError
from .spi import ConversationLease

__all__ = ["AsyncLeaseKeeper"]

logger = logging.getLogger(__name__)


class AsyncLeaseKeeper(LeaseKeeperBase):
    """Takes, renews and releases one conversation lease for one owner, from asyncio.

    The contract of :class:`~.leases.LeaseKeeper` with ``async with keeper.hold():``: re-entrant
    (tasks of one keeper share a held lease), the outermost hold waits up to ``wait_seconds``
    (:class:`~.leases.LeaseTimeoutError`), a renewer task renews the lease every
    ``renew_every_seconds`` (default a third of ``ttl_seconds``) and the end releases it; a
    lost lease raises :class:`~.leases.LeaseLostError` from :meth:`check`, from the next
    :meth:`hold` of the same outermost hold and at the end of that hold. A keeper serves
    consecutive event loops (``asyncio.run`` per call; a hold stays on the loop it began on);
    holds on two loops at once are not serialised with each other.
    """

    def _start(self) -> None:
        self._entry: LoopLocal[asyncio.Lock] = LoopLocal(asyncio.Lock)  # one per loop
        self._stop = asyncio.Event()
        self._renewer: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()

    @property
    def held(self) -> bool:
        """Whether the lease is held, not lost and within its validity."""
        return self._state.held

    def check(self) -> None:
        """Raise :class:`~.leases.LeaseLostError` if the lease is not (or no longer) held."""
        self._state.check()

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[ConversationLease]:
        """Hold the lease for the block (see the class docs)."""
        state = self._state
        async with self._entry.get():  # serialises outermost holds while they wait
            if not state.enter():
                taken, sent, prior = await self._take()
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
            lost, ending = state.leave()
            if ending is not None:
                self._stop.set()
                renewer, self._renewer = self._renewer, None
                # Shielded: a cancelled holder still stops its renewer and releases the lease.
                await asyncio.shield(self._finish(ending[0], renewer, ending[1]))
            if lost is not None and not failed:
                raise LeaseLostError(lost)

    async def _take(self) -> tuple[ConversationLease, float, ConversationLease | None]:
        """Wait for the lease (bounded); returns it, the monotonic time its request left and
        the stored lease as read just before that request (to judge a takeover)."""
        owner = self._state.next_owner()
        pauses = self._state.pauses()
        while True:
            prior = await asyncio.to_thread(self.store.get_lease, self.lease_key)
            sent = time.monotonic()
            request = asyncio.ensure_future(
                asyncio.to_thread(self.store.acquire_lease, self.lease_key, owner, self.ttl_seconds)
            )
            try:
                lease = await asyncio.shield(request)
            except asyncio.CancelledError:
                request.add_done_callback(self._release_orphan)
                raise
            if lease is not None:
                return lease, sent, prior
            await asyncio.sleep(next(pauses))

    def _release_orphan(self, request: asyncio.Future[ConversationLease | None]) -> None:
        """Release a lease that an acquire of a cancelled hold took after all."""
        if request.cancelled() or request.exception() is not None:
            return
        lease = request.result()
        if lease is None:
            return
        task = asyncio.ensure_future(self._finish(lease, None, True))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _start_renewer(self, token: int) -> None:
        self._stop = asyncio.Event()
        self._renewer = asyncio.create_task(
            self._renew_loop(self._stop, token), name=f"lease-renewer-{self.lease_key[:8]}"
        )

    async def _finish(
        self, lease: ConversationLease | None, renewer: asyncio.Task[None] | None, release: bool
    ) -> None:
        """Wait for the renewer (its store call in flight ends first), then release the lease."""
        if renewer is not None:
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(renewer), self.ttl_seconds)
        if lease is None or not release:
            return
        try:
            await asyncio.to_thread(self.store.release_lease, lease)
        except Exception:
            # The lease then expires after its TTL; nothing else is harmed.
            logger.warning(
                "releasing the lease of %s failed", self._state.description, exc_info=True
            )

    async def _renew_loop(self, stop: asyncio.Event, token: int) -> None:
        state = self._state
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.renew_every_seconds)
            if stop.is_set():
                return
            lease = state.to_renew(token)
            if lease is None:
                return
            sent = time.monotonic()
            try:
                renewed = await asyncio.to_thread(self.store.renew_lease, lease, self.ttl_seconds)
            except Exception as error:
                if state.renewal_failed(error):
                    return
                continue
            if stop.is_set() or not state.renewal_answered(renewed, sent):
                return
