"""Running a server coroutine until SIGINT or SIGTERM.

A signal cancels the serving task; its ``finally`` blocks close the served runtimes, and the
process then exits normally.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine
from typing import Any

__all__ = ["run_until_signal"]

logger = logging.getLogger(__name__)


async def _serve(main: Coroutine[Any, Any, None]) -> bool:
    task = asyncio.ensure_future(main)
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def stop(signum: int) -> None:
        logger.info("received signal %d: shutting down", signum)
        received.append(signum)
        task.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop, signum)
    try:
        await task
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return bool(received)


def run_until_signal(main: Coroutine[Any, Any, None]) -> bool:
    """Run ``main`` on a new event loop until it returns or SIGINT/SIGTERM cancels it.

    Returns whether a signal stopped it. Exceptions of ``main`` propagate.
    """
    return asyncio.run(_serve(main))
