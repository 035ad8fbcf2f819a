"""Running one command in a sandbox from asyncio, on the SDK's async command API.

The twin of :mod:`.commands`, with the same wrapper, events, options and result rules (the
functions and :class:`~.commands.CommandEvents` of that module): output stays in the sandbox
until the command ended, the result is returned at the trailer (no execd grace period) while a
task drains the rest of the stream (hanging up early would make execd kill every command running
in the sandbox), the wrapper's watchdog enforces the timeout and an outer deadline (timeout plus
a grace period) interrupts a stream that does not end.

**The command loop.** Streams are read on an event loop of the runner's own, in one daemon
thread started on first use (:class:`CommandLoop`), never on the caller's loop: a caller's
loop ends whenever its program says so (``asyncio.run`` returning, a fresh loop per test, a
framework's sync-over-async call) and cancels the tasks left on it, which would cut a drain
inside execd's grace period and kill every command running in the sandbox. The caller awaits
the command's coroutine there across threads and has its result at the report, as before; one
thread serves every command of the runner (no thread per command), and its loop holds its own
connection pool (:func:`~.async_sandbox.async_transport` keeps one per loop).
:meth:`AsyncCommandRunner.wait_for_drains` waits (bounded) for the drains in flight and
:meth:`AsyncCommandRunner.close` stops the loop (the runtime's close does both).

**Cancellation.** When the awaiting task is cancelled (``task.cancel()``, ``asyncio.timeout``,
its loop shutting down) the cancellation is forwarded to the command's task on the command loop,
which interrupts the command through execd; :class:`asyncio.CancelledError` propagates to the
caller once that is done. The wrapper turns execd's interrupt into a kill of the command's whole
process group. A command cancelled before execd named it is given up to
``interrupt_wait_seconds`` to be named, then interrupted. Its stream is drained like any other,
never cut.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from opensandbox.models.execd import ExecutionHandlers
from opensandbox.sandbox import Sandbox
from skillruntime.core.models import SkillExecutionResult
from skillruntime.core.runtime.rules import closed_error

from .commands import (
    DEFAULT_DEADLINE_GRACE_SECONDS,
    DRAIN_WAIT_SECONDS,
    INTERRUPT_WAIT_SECONDS,
    CommandEvents,
    command_options,
    command_script,
)

__all__ = ["AsyncCommandRunner", "CommandLoop"]

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


class AsyncCommandRunner:
    """Runs commands in one sandbox from asyncio, on its :class:`CommandLoop`, for callers on
    any event loop; see the module docs. :meth:`close` ends it."""

    def __init__(
        self,
        *,
        uid: int | None = None,
        gid: int | None = None,
        deadline_grace_seconds: float = DEFAULT_DEADLINE_GRACE_SECONDS,
        interrupt_wait_seconds: float = INTERRUPT_WAIT_SECONDS,
    ) -> None:
        self._uid = uid
        self._gid = gid
        self._grace = deadline_grace_seconds
        self._interrupt_wait = interrupt_wait_seconds
        self._loop = CommandLoop()
        self._drains: set[asyncio.Task[None]] = set()  # tasks of the command loop

    async def run(
        self,
        sandbox: Sandbox,
        command: str,
        *,
        working_directory: str,
        environment: Mapping[str, str],
        timeout_seconds: float,
        max_output_bytes: int,
    ) -> SkillExecutionResult:
        """Run ``command`` once and return its result; cancelling interrupts it."""
        return await self._loop.call(
            self._run(
                sandbox,
                command,
                working_directory=working_directory,
                environment=environment,
                timeout_seconds=timeout_seconds,
                max_output_bytes=max_output_bytes,
            )
        )

    async def _run(
        self,
        sandbox: Sandbox,
        command: str,
        *,
        working_directory: str,
        environment: Mapping[str, str],
        timeout_seconds: float,
        max_output_bytes: int,
    ) -> SkillExecutionResult:
        """:meth:`run`, on the command loop."""
        nonce = secrets.token_hex(8)
        events = CommandEvents(nonce, max_output_bytes)
        named = asyncio.Event()
        ready = asyncio.Event()  # the result is known, or the stream ended

        async def on_init(event: Any) -> None:
            events.on_init(event)
            named.set()

        async def on_stdout(message: Any) -> None:
            events.on_stdout(message)
            if events.known:
                ready.set()

        async def on_stderr(message: Any) -> None:
            logger.debug("the command wrapper wrote %d characters to stderr", len(message.text))

        async def on_complete(_: Any) -> None:
            events.on_complete()
            ready.set()

        async def on_error(error: Any) -> None:
            events.on_error(error)
            ready.set()

        handlers = ExecutionHandlers(
            on_init=on_init,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
            on_execution_complete=on_complete,
            on_error=on_error,
            skip_accumulation=True,
        )
        opts = command_options(
            uid=self._uid,
            gid=self._gid,
            working_directory=working_directory,
            environment=environment,
            timeout_seconds=timeout_seconds,
        )
        script = command_script(
            command,
            uid=self._uid,
            nonce=nonce,
            max_output_bytes=max_output_bytes,
            timeout_seconds=timeout_seconds,
        )
        error: BaseException | None = None

        async def stream() -> None:
            nonlocal error
            try:
                await sandbox.commands.run(script, opts=opts, handlers=handlers)
            except Exception as exc:  # judged with what the stream told (see command_result)
                if events.progress.abandoned:
                    logger.debug("a drained command stream ended with %s", type(exc))
                else:
                    error = exc
            finally:
                ready.set()

        started = time.monotonic()
        events.progress.start(timeout_seconds)
        reader = asyncio.ensure_future(stream())
        self._drains.add(reader)
        reader.add_done_callback(self._drains.discard)
        waiter = asyncio.ensure_future(ready.wait())
        interrupted = False
        try:
            done, _ = await asyncio.wait({waiter}, timeout=timeout_seconds + self._grace)
            if not done:
                interrupted = True
                await self._interrupt(sandbox, events)
                await asyncio.wait({waiter}, timeout=self._interrupt_wait)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(sandbox, events, reader, named))
            raise
        finally:
            waiter.cancel()
        return events.result(
            error=error,
            interrupted=interrupted,
            duration=time.monotonic() - started,
            timeout_seconds=timeout_seconds,
        )

    async def wait_for_drains(self, timeout_seconds: float = DRAIN_WAIT_SECONDS) -> bool:
        """Wait up to ``timeout_seconds`` for the command streams still being read to their end;
        ``True`` when none is left. A stream left over is cut when its connection closes."""
        if not self._loop.started:
            return True
        return await self._loop.call(self._wait_for_drains(timeout_seconds))

    async def cancel_drains(self) -> None:
        """Stop reading every stream still being drained (its sandbox is gone or going)."""
        if self._loop.started:
            await self._loop.call(self._cancel_drains())

    async def close(self, timeout_seconds: float = DRAIN_WAIT_SECONDS) -> None:
        """End the command loop (streams still being read are cut); later runs raise
        ``RuntimeClosedError``. Idempotent."""
        await self._loop.stop(timeout_seconds)

    async def _wait_for_drains(self, timeout_seconds: float) -> bool:
        drains = set(self._drains)
        if drains:
            await asyncio.wait(drains, timeout=timeout_seconds)
        left = [drain for drain in self._drains if not drain.done()]
        if left:
            logger.warning(
                "%d command stream(s) still open after %.1f s; closing them",
                len(left),
                timeout_seconds,
            )
        return not left

    async def _cancel_drains(self) -> None:
        drains = [drain for drain in self._drains if not drain.done()]
        for drain in drains:
            drain.cancel()
        for drain in drains:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await drain

    async def _stop(
        self,
        sandbox: Sandbox,
        events: CommandEvents,
        reader: asyncio.Future[None],
        named: asyncio.Event,
    ) -> None:
        """After a cancellation: wait (bounded) for execd to name the command and interrupt it;
        its stream goes on being drained (cutting it would make execd kill its neighbours)."""
        if not reader.done() and not named.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(named.wait(), self._interrupt_wait)
        if not events.known:
            await self._interrupt(sandbox, events)
        events.progress.abandoned = True

    async def _interrupt(self, sandbox: Sandbox, events: CommandEvents) -> None:
        execution_id = events.progress.execution_id
        if execution_id is None:
            logger.warning("cannot interrupt a command execd has not named")
            return
        try:
            await asyncio.wait_for(sandbox.commands.interrupt(execution_id), self._interrupt_wait)
        except Exception as exc:
            logger.warning("interrupting a command failed: %s", type(exc))
