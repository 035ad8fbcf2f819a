"""Retries of idempotent SDK calls (endpoint lookup, stat, reads, listings, renew).

Transient failures — connection errors, single-request timeouts, HTTP 429, 502 and 503 — are
retried with exponential backoff and jitter until a time budget is spent; the last wait is cut
so that no attempt starts after the budget, so a call gives up at most one attempt's duration
after its budget (an attempt against a server that refuses connections takes milliseconds; one
against a silent server is bounded by the request timeout). Commands and uploads are
never retried here: a command may have side effects and an upload consumes its source stream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    before_sleep_log,
    retry_if_exception,
    wait_exponential,
    wait_random,
)

from .errors import is_transient

__all__ = ["DEFAULT_RETRY_SECONDS", "acall_idempotent", "call_idempotent"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_RETRY_SECONDS = 20.0
"""Default time budget of the retries of one idempotent call."""


def _retry_rules(
    *,
    budget_seconds: float,
    initial_wait: float,
    max_wait: float,
    deadline: float | None,
    abandon: Callable[[BaseException], bool] | None,
) -> dict[str, Any]:
    """The tenacity arguments both :func:`call_idempotent` and :func:`acall_idempotent` use."""
    end = time.monotonic() + max(0.0, budget_seconds)
    if deadline is not None:
        end = min(end, deadline)
    # Exponential back-off plus up to one initial wait of jitter, spelled with strategies every
    # supported tenacity has (``wait_exponential_jitter`` renamed its parameters).
    backoff = wait_exponential(multiplier=initial_wait, max=max_wait) + wait_random(0, initial_wait)

    def worth_retrying(exc: BaseException) -> bool:
        if not is_transient(exc):
            return False
        return abandon is None or not abandon(exc)

    def wait(state: RetryCallState) -> float:
        return max(0.0, min(backoff(state), end - time.monotonic()))

    def out_of_time(_: RetryCallState) -> bool:
        return time.monotonic() >= end

    return {
        "retry": retry_if_exception(worth_retrying),
        "stop": out_of_time,
        "wait": wait,
        "reraise": True,
        "before_sleep": before_sleep_log(logger, logging.DEBUG),
    }


def call_idempotent(
    call: Callable[[], T],
    *,
    budget_seconds: float = DEFAULT_RETRY_SECONDS,
    initial_wait: float = 0.1,
    max_wait: float = 2.0,
    deadline: float | None = None,
    abandon: Callable[[BaseException], bool] | None = None,
) -> T:
    """Run ``call``; retry it on transient failures for at most ``budget_seconds``.

    ``deadline`` (a :func:`time.monotonic` instant) ends the retries earlier when it comes
    first, so several calls can share one budget. ``abandon`` is asked after each transient
    failure whether retrying is pointless (for example because the sandbox has vanished); when
    it answers ``True`` the failure is raised at once. The last exception is re-raised unchanged
    when the budget is spent or the failure is not transient.
    """
    rules = _retry_rules(
        budget_seconds=budget_seconds,
        initial_wait=initial_wait,
        max_wait=max_wait,
        deadline=deadline,
        abandon=abandon,
    )
    return Retrying(**rules)(call)


class _AbandonedError(Exception):
    """Carries a transient failure that ``abandon`` said not to retry (never transient)."""

    def __init__(self, failure: Exception) -> None:
        super().__init__(str(failure))
        self.failure = failure


async def acall_idempotent(
    call: Callable[[], Awaitable[T]],
    *,
    budget_seconds: float = DEFAULT_RETRY_SECONDS,
    initial_wait: float = 0.1,
    max_wait: float = 2.0,
    deadline: float | None = None,
    abandon: Callable[[BaseException], Awaitable[bool]] | None = None,
) -> T:
    """:func:`call_idempotent` for a coroutine function: the same rules, the waits on the event
    loop, and ``abandon`` a coroutine function (it may ask the server)."""
    rules = _retry_rules(
        budget_seconds=budget_seconds,
        initial_wait=initial_wait,
        max_wait=max_wait,
        deadline=deadline,
        abandon=None,
    )

    async def attempt() -> T:
        try:
            return await call()
        except Exception as exc:
            if abandon is not None and is_transient(exc) and await abandon(exc):
                raise _AbandonedError(exc) from exc
            raise

    try:
        result: T = await AsyncRetrying(**rules)(attempt)
    except _AbandonedError as abandoned:
        raise abandoned.failure from abandoned.failure.__cause__
    return result
