"""Running one command in a sandbox from asyncio, on the SDK's async command API.

The twin of :mod:`.commands`, with the same wrapper, events, options and result rules (the
functions and :class:`~.commands.CommandEvents` of that module): output stays in the sandbox
until the command ended, the result is returned at the trailer (no execd grace period) while a
task drains the rest of the stream (hanging up early would make execd kill every command running
in the sandbox), the wrapper's watchdog enforces the timeout and an outer deadline (timeout plus
a grace period) interrupts a stream that does not end. No thread is used.
:meth:`AsyncCommandRunner.wait_for_drains` waits (bounded) for the drains in flight; drains
left when the event loop ends are cancelled with it, so close the runtime before that.

**Cancellation.** When the awaiting task is cancelled (``task.cancel()``, ``asyncio.timeout``)
the command is interrupted through execd before :class:`asyncio.CancelledError` propagates; the
wrapper turns execd's interrupt into a kill of the command's whole process group. A command
cancelled before execd named it is given up to ``interrupt_wait_seconds`` to be named, then
interrupted. Its stream is drained like any other, never cut.
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
from skillruntime.core.models import SkillExecutionResult

from .commands import (
    DEADLINE_MARGIN_SECONDS,
    DEFAULT_DEADLINE_GRACE_SECONDS,
    DRAIN_WAIT_SECONDS,
    INTERRUPT_WAIT_SECONDS,
    CommandEvents,
    command_options,
    command_script,
)

__all__ = ["AsyncCommandRunner"]

logger = logging.getLogger(__name__)


class AsyncCommandRunner:
    """Runs commands in one sandbox from asyncio; see the module docs."""

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
        self._drains: set[asyncio.Task[None]] = set()

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
        events.progress.ends_by = started + timeout_seconds + DEADLINE_MARGIN_SECONDS
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

    async def cancel_drains(self) -> None:
        """Stop reading every stream still being drained (its sandbox is gone or going)."""
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
