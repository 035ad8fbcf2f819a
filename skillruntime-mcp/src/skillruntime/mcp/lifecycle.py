"""Running a server until SIGINT or SIGTERM.

A signal sets the ``stop`` event handed to the serving coroutine, which closes its runtimes
first (killing the commands still running, so in-flight tool calls end) and then stops
serving. The stdio transport reads stdin in a worker thread that no signal
can interrupt (and the SDK waits for it), so after a signal the process ends with status 0
without joining that thread, once every runtime is closed.

A second signal during the shutdown cuts it short: the process exits at once with status
128 + the signal's number (130 for SIGINT, 143 for SIGTERM), without waiting for the runtimes
to close or the grace to run out: the answer to a user pressing Ctrl+C twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

__all__ = ["STOP_GRACE_SECONDS", "run_until_signal", "serve_until"]

logger = logging.getLogger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

STOP_GRACE_SECONDS = 1.0
"""How long a stopped server may take to send the last results before the process exits."""


async def _main(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> bool:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            logger.warning("received signal %d again: exiting now, shutdown cut short", signum)
            _exit_now(128 + signum)
        logger.info("received signal %d: shutting down", signum)
        stop.set()

    for signum in _SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await main(stop)
    finally:
        for signum in _SIGNALS:
            loop.remove_signal_handler(signum)
    if stop.is_set():
        _exit_after_signal()
    return False


def run_until_signal(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` on a new event loop; SIGINT and SIGTERM set ``stop``.

    When ``main`` returns after a signal, the process exits with status 0; a second signal
    before that exits at once with status 128 + its number (see the module docstring).
    Exceptions of ``main`` propagate.
    """
    asyncio.run(_main(main))


async def serve_until(
    serving: Coroutine[Any, Any, None],
    stop: asyncio.Event | None,
    close: Callable[[], Awaitable[None]],
) -> None:
    """Run ``serving`` until it ends or ``stop`` is set; then ``close`` and end it.

    On ``stop``, ``close`` runs *before* ``serving`` is cancelled, so the tool calls in flight
    end (their commands are killed) instead of holding the shutdown. ``close`` runs in every
    case. After ``stop`` it waits at most :data:`STOP_GRACE_SECONDS` for ``serving`` to end
    (a transport blocked reading stdin never does; the process exit takes care of it).
    """
    task = asyncio.ensure_future(serving)
    try:
        if stop is None:
            await task
            return
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()
            return
        await close()
        task.cancel()
        await asyncio.wait({task}, timeout=STOP_GRACE_SECONDS)
        if task.done():
            with contextlib.suppress(asyncio.CancelledError):
                task.result()
    finally:
        task.cancel()
        await close()


def _exit_after_signal() -> None:
    """End the process with status 0 (see :func:`_exit_now`)."""
    _exit_now(0)


def _exit_now(status: int) -> None:
    """End the process with ``status``: flush the standard streams and the logging handlers,
    then exit without waiting for threads still blocked reading stdin."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    logging.shutdown()
    os._exit(status)
