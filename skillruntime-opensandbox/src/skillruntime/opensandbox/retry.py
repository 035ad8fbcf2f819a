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
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    before_sleep_log,
    retry_if_exception,
    wait_exponential,
    wait_random,
)

from .errors import is_transient

__all__ = ["DEFAULT_RETRY_SECONDS", "call_idempotent"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_RETRY_SECONDS = 20.0
"""Default time budget of the retries of one idempotent call."""


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

    retrying = Retrying(
        retry=retry_if_exception(worth_retrying),
        stop=out_of_time,
        wait=wait,
        reraise=True,
        before_sleep=before_sleep_log(logger, logging.DEBUG),
    )
    return retrying(call)
