"""The ``sandbox.attach`` audit event of an AIO runtime: its first operation on the service.

An AIO runtime never creates, replaces or destroys the service, so ``sandbox.attach`` is its one
lifecycle event: the first operation that reaches the service and creates the workspace (or the
shared skills root) is audited as ``sandbox.attach`` around the operation itself. That operation
is a ``prepare`` or a file operation (one ``make_directory`` call) or the first ``execute``,
whose command creates the workspace in the same request; the attach event then spans that
command.

Exactly one operation claims the event; when it fails (the service was unreachable) the claim is
given back, so the next first operation is audited as an attach again. The claim is a plain lock,
held for a check and an assignment only, so the sync and the async runtime share this class.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from skillruntime.core.observability.audit import audited

__all__ = ["FirstUse"]


class FirstUse:
    """Which operation of one runtime is its ``sandbox.attach``: see the module docs."""

    __slots__ = ("_claimed", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = False

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    @contextmanager
    def attach(self, fields: Mapping[str, Any]) -> Iterator[None]:
        """Run the block; audit it as ``sandbox.attach`` (with ``fields``) when it is the first
        operation on the service and no other one holds the claim."""
        if not self._claim():
            yield
            return
        try:
            with audited("sandbox.attach", **fields):
                yield
        except BaseException:
            with self._lock:
                self._claimed = False
            raise
