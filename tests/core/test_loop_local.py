"""``LoopLocal``: one value per event loop, closed on its loop when that loop shuts down."""

from __future__ import annotations

import asyncio
import threading

from skillruntime.core.runtime.loop_local import LoopLocal


class _Resource:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed_on: asyncio.AbstractEventLoop | None = None
        self.closed = threading.Event()

    async def close(self) -> None:
        self.closed_on = asyncio.get_running_loop()
        self.closed.set()


def test_each_loop_gets_its_own_value_closed_when_asyncio_run_ends() -> None:
    local: LoopLocal[_Resource] = LoopLocal(_Resource, aclose=_Resource.close)

    async def use() -> tuple[_Resource, _Resource]:
        return await local.aget(), await local.aget()

    first, again = asyncio.run(use())
    second, _ = asyncio.run(use())
    assert first is again
    assert second is not first
    assert first.closed_on is first.loop  # closed on its own loop, before it closed
    assert second.closed_on is second.loop


def test_aclose_closes_the_running_loops_value_and_the_next_call_makes_a_new_one() -> None:
    local: LoopLocal[_Resource] = LoopLocal(_Resource, aclose=_Resource.close)

    async def main() -> tuple[_Resource, _Resource]:
        value = await local.aget()
        await local.aclose()
        assert value.closed_on is value.loop
        return value, await local.aget()

    old, new = asyncio.run(main())
    assert new is not old


def test_aclose_closes_a_value_of_a_loop_running_in_another_thread() -> None:
    local: LoopLocal[_Resource] = LoopLocal(_Resource, aclose=_Resource.close)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        other = asyncio.run_coroutine_threadsafe(local.aget(), loop).result()
        asyncio.run(local.aclose())
        assert other.closed.wait(10)
        assert other.closed_on is loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_without_aclose_values_of_closed_loops_are_dropped() -> None:
    local: LoopLocal[asyncio.Lock] = LoopLocal(asyncio.Lock)

    async def contend() -> None:
        lock = local.get()
        async with lock:
            waiter = asyncio.ensure_future(lock.acquire())  # binds the lock to this loop
            await asyncio.sleep(0)
        await waiter
        lock.release()

    for _ in range(3):
        asyncio.run(contend())  # a shared asyncio.Lock would raise on the second loop
    assert len(local._slots) == 1
