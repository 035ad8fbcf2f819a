"""``LoopLocal``: one value per event loop, for objects that must serve any loop.

An async runtime object serves whichever event loop awaits it, one after the other (a program
calling :func:`asyncio.run` per request), so it keeps no loop-bound object (an
:class:`asyncio.Lock`, a connection pool, a future) from one loop for use on another: it keeps one
per loop here.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["LoopLocal"]

V = TypeVar("V")


class LoopLocal(Generic[V]):
    """One ``factory()`` value per event loop: what :meth:`get` (or :meth:`aget`) returns on
    the running loop.

    For loop-bound objects (an :class:`asyncio.Lock` binds to the loop of its first waiter, a
    connection pool to the loop of its sockets) kept by an object that must serve any loop.
    With ``aclose``, a value fetched with :meth:`aget` is closed on its own loop when that loop's
    runner finalises async generators (:meth:`asyncio.loop.shutdown_asyncgens`, which
    :func:`asyncio.run` calls before closing the loop), and :meth:`aclose` closes them all.
    Values of loops closed otherwise are dropped unclosed when a new loop asks. Thread-safe.
    """

    def __init__(
        self, factory: Callable[[], V], *, aclose: Callable[[V], Awaitable[None]] | None = None
    ) -> None:
        self._factory = factory
        self._aclose = aclose
        self._slots: dict[asyncio.AbstractEventLoop, _LoopSlot[V]] = {}
        self._guard = threading.Lock()

    def get(self) -> V:
        """The running loop's value, made on its first use there."""
        return self._slot(asyncio.get_running_loop()).value

    async def aget(self) -> V:
        """The running loop's value; with ``aclose``, it is closed when the loop shuts down."""
        loop = asyncio.get_running_loop()
        slot = self._slot(loop)
        if self._aclose is not None and slot.keeper is None:
            slot.keeper = self._close_at_shutdown(loop, slot)
            await slot.keeper.__anext__()  # registers the generator with the running loop
        return slot.value

    async def aclose(self) -> None:
        """Close every value (``aclose``) and forget them: the running loop's here, those of
        other loops still running on their loops; those of closed loops are dropped."""
        current = asyncio.get_running_loop()
        with self._guard:
            slots, self._slots = self._slots, {}
        for loop, slot in slots.items():
            if loop is current:
                await self._close(slot)
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    asyncio.run_coroutine_threadsafe(self._close(slot), loop)

    def _slot(self, loop: asyncio.AbstractEventLoop) -> _LoopSlot[V]:
        with self._guard:
            slot = self._slots.get(loop)
            if slot is None:
                for old in [known for known in self._slots if known.is_closed()]:
                    del self._slots[old]
                slot = self._slots[loop] = _LoopSlot(self._factory())
            return slot

    async def _close_at_shutdown(
        self, loop: asyncio.AbstractEventLoop, slot: _LoopSlot[V]
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._guard:
                if self._slots.get(loop) is slot:
                    del self._slots[loop]
            if self._aclose is not None:
                await self._aclose(slot.value)

    async def _close(self, slot: _LoopSlot[V]) -> None:
        keeper, slot.keeper = slot.keeper, None
        if keeper is not None:
            await keeper.aclose()  # closes the value
        elif self._aclose is not None:
            await self._aclose(slot.value)


class _LoopSlot(Generic[V]):
    """A value of :class:`LoopLocal` and the generator that closes it at loop shutdown."""

    def __init__(self, value: V) -> None:
        self.value = value
        self.keeper: AsyncGenerator[None, None] | None = None
