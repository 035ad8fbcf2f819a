"""Running one command in a sandbox from asyncio, on the SDK's async command API.

The twin of :mod:`.commands`, with the same wrapper, events, options and result rules (the
functions and :class:`~.commands.CommandEvents` of that module): output stays in the sandbox
until the command ended, reading stops at the trailer (no execd grace period), the wrapper's
watchdog enforces the timeout and an outer deadline (timeout plus a grace period) interrupts a
stream that does not end. No thread is used.

**Cancellation.** When the awaiting task is cancelled (``task.cancel()``, ``asyncio.timeout``)
the command is interrupted through execd before :class:`asyncio.CancelledError` propagates; the
wrapper turns execd's interrupt into a kill of the command's whole process group. A command
cancelled before execd named it is given up to ``interrupt_wait_seconds`` to be named, then
interrupted.
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
    DEFAULT_DEADLINE_GRACE_SECONDS,
    INTERRUPT_WAIT_SECONDS,
    CommandEvents,
    command_options,
    command_script,
)

__all__ = ["AsyncCommandRunner"]

logger = logging.getLogger(__name__)


class _StreamDoneError(BaseException):
    """Raised from an event handler once the result is known, to stop reading the stream (a
    ``BaseException`` so the SDK's conversion of ``Exception`` lets it through)."""


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

        async def on_init(event: Any) -> None:
            events.on_init(event)
            named.set()

        async def on_stdout(message: Any) -> None:
            if events.on_stdout(message):
                raise _StreamDoneError

        async def on_stderr(message: Any) -> None:
            logger.debug("the command wrapper wrote %d characters to stderr", len(message.text))

        async def on_complete(_: Any) -> None:
            events.on_complete()
            raise _StreamDoneError

        async def on_error(error: Any) -> None:
            events.on_error(error)
            raise _StreamDoneError

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
            except _StreamDoneError:
                pass
            except Exception as exc:  # judged with what the stream told (see command_result)
                error = exc

        started = time.monotonic()
        reader = asyncio.ensure_future(stream())
        interrupted = False
        try:
            done, _ = await asyncio.wait({reader}, timeout=timeout_seconds + self._grace)
            if not done:
                interrupted = True
                await self._interrupt(sandbox, events)
                await asyncio.wait({reader}, timeout=self._interrupt_wait)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(sandbox, events, reader, named))
            raise
        finally:
            if not reader.done():
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
        return events.result(
            error=error,
            interrupted=interrupted,
            duration=time.monotonic() - started,
            timeout_seconds=timeout_seconds,
        )

    async def _stop(
        self,
        sandbox: Sandbox,
        events: CommandEvents,
        reader: asyncio.Future[None],
        named: asyncio.Event,
    ) -> None:
        """After a cancellation: wait (bounded) for execd to name the command, interrupt it and
        stop reading its stream."""
        if not reader.done() and not named.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(named.wait(), self._interrupt_wait)
        if not (events.progress.terminal or events.output.trailer is not None):
            await self._interrupt(sandbox, events)
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _interrupt(self, sandbox: Sandbox, events: CommandEvents) -> None:
        execution_id = events.progress.execution_id
        if execution_id is None:
            logger.warning("cannot interrupt a command execd has not named")
            return
        try:
            await asyncio.wait_for(sandbox.commands.interrupt(execution_id), self._interrupt_wait)
        except Exception as exc:
            logger.warning("interrupting a command failed: %s", type(exc))
