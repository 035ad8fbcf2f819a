"""``AsyncCommandRunner``: one command in a sandbox through execd's event stream, with
``Sandbox``.

``skillruntime.opensandbox.async_commands`` is the source of both runners:
``skillruntime.opensandbox.commands`` (``CommandRunner``, on the SDK's sync API) is generated
from it by ``scripts/generate_sync.py``. The rules (the wrapper and options of a command, what
its events told, the result or typed error they give) live once, free of I/O, in
:mod:`.command_plans`, whose names are also importable from here: output stays in the sandbox
until the command ended, the result is returned at the trailer (no execd grace period) while the
rest of the stream is drained (hanging up early would make execd kill every command running in
the sandbox), the wrapper's watchdog enforces the timeout and an outer deadline (timeout plus a
grace period) interrupts a stream that does not end. A runner only moves the stream.

**Where streams are read.** On the sync face each command has a reading thread of its own,
which outlives the call while it drains the rest of the stream; the runner is thread-safe. On
the async face streams are read on the runner's own :class:`~.command_loop.CommandLoop` (one
daemon thread for every command, never the caller's loop, whose end would cut a drain), and
the runner's ``close`` stops that loop. :meth:`AsyncCommandRunner.wait_for_drains` waits
(bounded) for the drains in flight; the runtime calls it before it releases a shared sandbox's
connections and before it kills a sandbox (execd dies with it, cutting the streams, which the
SDK logs at ERROR).

**Cancellation** (async face). When the awaiting task is cancelled (``task.cancel()``,
``asyncio.timeout``, its loop shutting down) the cancellation is forwarded to the command's task
on the command loop, which interrupts the command through execd; :class:`asyncio.CancelledError`
propagates to the caller once that is done. The wrapper turns execd's interrupt into a kill of
the command's whole process group. A command cancelled before execd named it is given up to
``interrupt_wait_seconds`` to be named, then interrupted. Its stream is drained like any other,
never cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Any

from opensandbox.models.execd import ExecutionHandlers
from opensandbox.sandbox import Sandbox
from skillruntime.core.errors import RuntimeClosedError
from skillruntime.core.models import SkillExecutionResult

from .command_loop import CommandLoop
from .command_plans import (
    DEADLINE_MARGIN_SECONDS,
    DEFAULT_DEADLINE_GRACE_SECONDS,
    DRAIN_WAIT_SECONDS,
    INTERRUPT_WAIT_SECONDS,
    CommandEvents,
    CommandNotStartedError,
    CommandOutcomeUnknownError,
    command_options,
    command_result,
    command_script,
)

if False:  # unasync: sync
    import threading

__all__ = [
    "DEADLINE_MARGIN_SECONDS",
    "DEFAULT_DEADLINE_GRACE_SECONDS",
    "DRAIN_WAIT_SECONDS",
    "INTERRUPT_WAIT_SECONDS",
    "AsyncCommandRunner",
    "CommandEvents",
    "CommandNotStartedError",
    "CommandOutcomeUnknownError",
    "command_options",
    "command_result",
    "command_script",
]

logger = logging.getLogger(__name__)


if True:  # unasync: async

    async def _wait_event(event: asyncio.Event, timeout_seconds: float) -> bool:
        """Wait up to ``timeout_seconds`` for ``event``; whether it is set."""
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({waiter}, timeout=timeout_seconds)
        finally:
            waiter.cancel()
        return event.is_set()


else:  # unasync: sync

    def _wait_event(event: threading.Event, timeout_seconds: float) -> bool:
        """Wait up to ``timeout_seconds`` for ``event``; whether it is set."""
        return event.wait(timeout_seconds)


class AsyncCommandRunner:
    """Runs commands in one sandbox; see the module docs and :mod:`.command_plans` for the exact
    behaviour."""

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
        if True:  # unasync: async
            self._loop = CommandLoop()
            self._drains: set[asyncio.Task[None]] = set()  # tasks of the command loop
        else:  # unasync: sync
            self._drains: set[threading.Thread] = set()
            self._drains_lock = threading.Lock()

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
        """Run ``command`` once and return its result (see the module docs)."""
        if True:  # unasync: async
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
        else:  # unasync: sync
            return self._run(
                sandbox,
                command,
                working_directory=working_directory,
                environment=environment,
                timeout_seconds=timeout_seconds,
                max_output_bytes=max_output_bytes,
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
        """:meth:`run`, on the command loop; cancelling interrupts the command."""
        if False:  # unasync: sync docstring
            """The body of :meth:`run`."""
        nonce = secrets.token_hex(8)
        events = CommandEvents(nonce, max_output_bytes)
        ready = asyncio.Event()  # the result is known, or the stream ended
        if True:  # unasync: async
            named = asyncio.Event()  # execd named the command

        async def on_init(event: Any) -> None:
            with events.lock:
                events.on_init(event)
            if True:  # unasync: async
                named.set()

        async def on_stdout(message: Any) -> None:
            with events.lock:
                events.on_stdout(message)
                if events.known:
                    ready.set()

        async def on_stderr(message: Any) -> None:
            logger.debug("the command wrapper wrote %d characters to stderr", len(message.text))

        async def on_complete(_: Any) -> None:
            with events.lock:
                events.on_complete()
            ready.set()

        async def on_error(error: Any) -> None:
            with events.lock:
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
            environment=environment,
        )
        error: BaseException | None = None

        async def stream() -> None:
            nonlocal error
            try:
                await sandbox.commands.run(script, opts=opts, handlers=handlers)
            except Exception as exc:  # judged with what the stream told (see command_result)
                with events.lock:
                    if events.progress.abandoned:
                        logger.debug("a drained command stream ended with %s", type(exc))
                    else:
                        error = exc
            finally:
                ready.set()
                if False:  # unasync: sync
                    with self._drains_lock:
                        self._drains.discard(threading.current_thread())

        started = time.monotonic()
        events.progress.start(timeout_seconds)
        if True:  # unasync: async
            reader = asyncio.ensure_future(stream())
            self._drains.add(reader)
            reader.add_done_callback(self._drains.discard)
            try:
                interrupted = await self._wait(sandbox, events, ready, timeout_seconds)
            except asyncio.CancelledError:
                await asyncio.shield(self._stop(sandbox, events, reader, named))
                raise
        else:  # unasync: sync
            reader = threading.Thread(target=stream, name="opensandbox-command", daemon=True)
            with self._drains_lock:
                self._drains.add(reader)
            reader.start()
            interrupted = self._wait(sandbox, events, ready, timeout_seconds)
        with events.lock:
            return events.result(
                error=error,
                interrupted=interrupted,
                duration=time.monotonic() - started,
                timeout_seconds=timeout_seconds,
            )

    async def _wait(
        self,
        sandbox: Sandbox,
        events: CommandEvents,
        ready: asyncio.Event,
        timeout_seconds: float,
    ) -> bool:
        """Wait for the result to be known; past the outer deadline (the timeout plus the grace
        period) interrupt the command and wait up to ``interrupt_wait_seconds`` more for it.
        ``True`` when the command was interrupted."""
        if await _wait_event(ready, timeout_seconds + self._grace):
            return False
        await self._interrupt(sandbox, events)
        await _wait_event(ready, self._interrupt_wait)
        return True

    async def wait_for_drains(self, timeout_seconds: float = DRAIN_WAIT_SECONDS) -> bool:
        """Wait up to ``timeout_seconds`` for the command streams still being read to their end;
        ``True`` when none is left. A stream left over is cut when its connection closes."""
        if True:  # unasync: async
            if not self._loop.started:
                return True
            try:
                return await self._loop.call(self._wait_for_drains(timeout_seconds))
            except RuntimeClosedError:  # closed: its loop ended, no stream is read anymore
                return True
        else:  # unasync: sync
            return self._wait_for_drains(timeout_seconds)

    async def _wait_for_drains(self, timeout_seconds: float) -> bool:
        if True:  # unasync: async
            drains = set(self._drains)
            if drains:
                await asyncio.wait(drains, timeout=timeout_seconds)
            left = sum(not drain.done() for drain in self._drains)
        else:  # unasync: sync
            deadline = time.monotonic() + timeout_seconds
            with self._drains_lock:
                drains = list(self._drains)
            for drain in drains:
                drain.join(max(deadline - time.monotonic(), 0.0))
            with self._drains_lock:
                left = len(self._drains)
        if left:
            logger.warning(
                "%d command stream(s) still open after %.1f s; closing them", left, timeout_seconds
            )
        return left == 0

    async def _interrupt(self, sandbox: Sandbox, events: CommandEvents) -> None:
        with events.lock:
            execution_id = events.progress.execution_id
        if execution_id is None:
            logger.warning("cannot interrupt a command execd has not named")
            return
        try:
            if True:  # unasync: async
                await asyncio.wait_for(
                    sandbox.commands.interrupt(execution_id), self._interrupt_wait
                )
            else:  # unasync: sync
                sandbox.commands.interrupt(execution_id)
        except Exception as exc:
            logger.warning("interrupting a command failed: %s", type(exc))

    if True:  # unasync: async

        async def cancel_drains(self) -> None:
            """Stop reading every stream still being drained (its sandbox is gone or going)."""
            if self._loop.started:
                with contextlib.suppress(RuntimeClosedError):  # closed: no stream is read anymore
                    await self._loop.call(self._cancel_drains())

        async def close(self, timeout_seconds: float = DRAIN_WAIT_SECONDS) -> None:
            """End the command loop (streams still being read are cut); later runs raise
            ``RuntimeClosedError``. Idempotent."""
            await self._loop.stop(timeout_seconds)

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
            with events.lock:
                known = events.known
            if not known:
                await self._interrupt(sandbox, events)
            with events.lock:
                events.progress.abandoned = True
