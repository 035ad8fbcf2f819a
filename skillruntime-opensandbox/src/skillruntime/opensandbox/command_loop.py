"""The event loop the async command runner reads command streams on.

Streams are read on an event loop of the runner's own, in one daemon thread started on first
use (:class:`CommandLoop`), never on the caller's loop: a caller's loop ends whenever its program
says so (``asyncio.run`` returning, a fresh loop per test, a framework's sync-over-async call)
and cancels the tasks left on it, which would cut a drain inside execd's grace period and kill
every command running in the sandbox. The caller awaits the command's coroutine there across
threads and has its result at the report; one thread serves every command of the runner (no
thread per command), and its loop holds its own connection pool
(:func:`~.async_sandbox.async_transport` keeps one per loop). Only the async face has it: the
sync runner reads each stream on a thread of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from skillruntime.core.runtime.rules import closed_error

__all__ = ["CommandLoop"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CommandLoop:
    """An event loop in one daemon thread, started by the first :meth:`call` and ended by
    :meth:`stop`; it outlives the loops of its callers. Thread-safe; after :meth:`stop`, calls
    raise ``RuntimeClosedError``."""

    def __init__(self, runtime_name: str = "opensandbox") -> None:
        self._runtime_name = runtime_name
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._outcomes: set[concurrent.futures.Future[Any]] = set()  # calls not yet settled

    @property
    def started(self) -> bool:
        """Whether the loop was started (and may hold tasks)."""
        return self._loop is not None

    async def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` as a task of this loop and return its outcome. Cancelling the
        caller cancels that task and waits for it to end (its own cancellation handling runs
        there) before :class:`asyncio.CancelledError` propagates; a second cancellation stops
        only the waiting."""
        try:
            loop = self._running()
        except BaseException:
            coroutine.close()
            raise
        outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._guard:
            self._outcomes.add(outcome)
        outcome.add_done_callback(self._settled)
        tasks: list[asyncio.Task[T]] = []

        def start() -> None:
            task = loop.create_task(coroutine)
            tasks.append(task)
            task.add_done_callback(lambda done: self._settle(outcome, done))

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # stopped meanwhile
            coroutine.close()
            outcome.cancel()
            raise closed_error(self._runtime_name) from None
        waiter = asyncio.wrap_future(outcome)
        try:
            return await asyncio.shield(waiter)
        except asyncio.CancelledError:

            def forward() -> None:  # runs after start() (call_soon_threadsafe keeps order)
                tasks[0].cancel()

            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(forward)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(waiter)
            raise

    async def stop(self, timeout_seconds: float) -> bool:
        """Stop the loop: the tasks left on it are cancelled, its async generators (connection
        pools) finalised and it is closed, waited for up to ``timeout_seconds``; ``True`` when
        it ended in time. Idempotent."""
        with self._guard:
            self._stopped = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return True
        with contextlib.suppress(RuntimeError):  # already closed
            loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, timeout_seconds)
        if thread.is_alive():
            logger.warning("the command loop did not end within %.1f s", timeout_seconds)
        return not thread.is_alive()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._stopped:
                raise closed_error(self._runtime_name)
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._serve, args=(loop,), name="opensandbox-commands", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _settle(self, outcome: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
        """Copy ``task``'s outcome into ``outcome`` (given up when the caller's loop went away);
        a task cancelled by :meth:`stop` is a ``RuntimeClosedError`` to its caller."""
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            if task.cancelled():
                if self._stopped:
                    outcome.set_exception(closed_error(self._runtime_name))
                else:
                    outcome.cancel()
            elif (error := task.exception()) is not None:
                outcome.set_exception(error)
            else:
                outcome.set_result(task.result())

    def _settled(self, outcome: concurrent.futures.Future[Any]) -> None:
        with self._guard:
            self._outcomes.discard(outcome)

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop's thread: run ``loop`` until stopped, then end it as ``asyncio.run`` ends
        its loop; a call that never ran (it raced the stop) raises ``RuntimeClosedError``."""
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        except Exception:
            logger.exception("ending the command loop failed")
        finally:
            asyncio.set_event_loop(None)
            loop.close()
            with self._guard:
                unsettled, self._outcomes = self._outcomes, set()
            for outcome in unsettled:
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    outcome.set_exception(closed_error(self._runtime_name))
