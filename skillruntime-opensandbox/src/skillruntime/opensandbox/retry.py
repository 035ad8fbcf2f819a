"""Retries of idempotent SDK calls (endpoint lookup, stat, reads, listings, renew).

Transient failures — connection errors, single-request timeouts, HTTP 429, 502 and 503 — are
retried with exponential backoff and jitter until a time budget is spent. Commands and uploads are
never retried here: a command may have side effects and an upload consumes its source stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_delay,
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
) -> T:
    """Run ``call``; retry it on transient failures for at most ``budget_seconds``.

    The last exception is re-raised unchanged when the budget is spent or the failure is not
    transient.
    """
    retrying = Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_delay(budget_seconds),
        # Exponential back-off plus up to one initial wait of jitter, spelled with strategies
        # every supported tenacity has (``wait_exponential_jitter`` renamed its parameters).
        wait=wait_exponential(multiplier=initial_wait, max=max_wait) + wait_random(0, initial_wait),
        reraise=True,
        before_sleep=before_sleep_log(logger, logging.DEBUG),
    )
    return retrying(call)
