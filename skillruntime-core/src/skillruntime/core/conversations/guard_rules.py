"""The rules of the exclusive guards, written once for the sync and the async face.

:class:`ConversationGuardBase` holds what :class:`~skillruntime.core.conversations.exclusive.
ConversationGuard` and :class:`~skillruntime.core.conversations.async_exclusive.
AsyncConversationGuard` share: their settings, the check of those settings and the activity
rules (when an activity write is due, whether it must first register the record, and the write
itself, which never raises). It starts no thread or task and holds no lease: each face adds the
lease keeper of its concurrency model and decides how the store write runs (inline for the sync
guard, in a worker thread for the async one). :func:`local_service_key` names the workspaces of
this host's file system.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .lease_rules import DEFAULT_LEASE_TTL_SECONDS, DEFAULT_LEASE_WAIT_SECONDS
from .spi import ConversationRecord, ConversationStore, modify_record

__all__ = ["DEFAULT_ACTIVITY_INTERVAL_SECONDS", "ConversationGuardBase", "local_service_key"]

# The logger the guards have always written to (the module their classes are used from).
logger = logging.getLogger("skillruntime.core.conversations.exclusive")

DEFAULT_ACTIVITY_INTERVAL_SECONDS = 60.0
"""At most one activity write per conversation and runtime object in this many seconds."""


class ConversationGuardBase:
    """What the sync and async guards share: settings, checks and the activity rules.

    ``record_factory`` builds the record to insert when the store has none yet (runtimes whose
    records are written elsewhere, like OpenSandbox, pass ``None``). Subclasses add the lease
    keeper of their concurrency model and call :meth:`_activity_due` then
    :meth:`_write_activity` (a store call: the async guard runs it in a worker thread).
    """

    def __init__(
        self,
        store: ConversationStore,
        storage_key: str,
        *,
        description: str,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        lease_owner: str | None = None,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
        record_factory: Callable[[], ConversationRecord] | None = None,
    ) -> None:
        if activity_interval_seconds <= 0:
            raise ValueError("activity_interval_seconds must be positive")
        self.store = store
        self.storage_key = storage_key
        self.exclusive = exclusive
        self.description = description
        self.lease_ttl_seconds = lease_ttl_seconds
        self.lease_wait_seconds = lease_wait_seconds
        self.lease_owner = lease_owner
        self._interval = activity_interval_seconds
        self._record_factory = record_factory
        self._registered = record_factory is None
        self._last_activity = time.monotonic()
        self._activity_lock = threading.Lock()
        self.keeper = self._new_keeper() if exclusive else None

    def _new_keeper(self) -> object:
        """The lease keeper of an exclusive guard, built from the settings above."""
        raise NotImplementedError

    def _activity_due(self) -> bool | None:
        """Whether an activity write is due now: ``None`` when not, else whether it must first
        register the record (the write is then counted as done)."""
        with self._activity_lock:
            register = not self._registered
            due = time.monotonic() - self._last_activity >= self._interval
            if not register and not due:
                return None
            self._last_activity = time.monotonic()
            self._registered = True
        return register

    def _write_activity(self, register: bool) -> None:
        """The activity write :meth:`_activity_due` asked for; never raises."""
        try:
            factory = self._record_factory
            if register and factory is not None and self.store.create(factory()):
                return
            modify_record(self.store, self.storage_key, lambda record: record.with_changes())
        except Exception:
            # Activity is advisory; the operation itself must not fail because of it.
            logger.warning("noting activity of %s failed", self.storage_key[:12], exc_info=True)
            with self._activity_lock:
                self._registered = self._registered and not register


def local_service_key(conversations_root: str) -> str:
    """The service key of workspaces under ``conversations_root`` on this host's file system."""
    return f"file://{conversations_root}"
