"""The in-memory conversation store: records and leases of one process, lost when it exits."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from .lease_rules import check_lease_arguments, lease_expiry
from .spi import ConversationLease, ConversationRecord, ConversationStore

__all__ = ["InMemoryConversationStore"]


def _now() -> datetime:
    return datetime.now(UTC)


class InMemoryConversationStore(ConversationStore):
    """A store for one process: records live in a dict guarded by a lock."""

    def __init__(self) -> None:
        self._records: dict[str, ConversationRecord] = {}
        self._leases: dict[str, ConversationLease] = {}
        self._lock = threading.Lock()

    def get(self, storage_key: str) -> ConversationRecord | None:
        with self._lock:
            return self._records.get(storage_key)

    def create(self, record: ConversationRecord) -> bool:
        with self._lock:
            if record.storage_key in self._records:
                return False
            self._records[record.storage_key] = record.with_changes(version=1)
            return True

    def update(self, record: ConversationRecord) -> bool:
        with self._lock:
            current = self._records.get(record.storage_key)
            if current is None or current.version != record.version:
                return False
            self._records[record.storage_key] = record.with_changes(version=record.version + 1)
            return True

    def delete(self, storage_key: str) -> ConversationRecord | None:
        with self._lock:
            return self._records.pop(storage_key, None)

    def list_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ConversationRecord]:
        with self._lock:
            keys = sorted(key for key in self._records if after is None or key > after)
            return [self._records[key] for key in keys[: max(0, limit)]]

    def delete_version(self, storage_key: str, version: int) -> bool:
        with self._lock:
            current = self._records.get(storage_key)
            if current is None or current.version != version:
                return False
            del self._records[storage_key]
            return True

    def get_lease(self, lease_key: str) -> ConversationLease | None:
        with self._lock:
            return self._leases.get(lease_key)

    def acquire_lease(
        self, lease_key: str, owner: str, ttl_seconds: float
    ) -> ConversationLease | None:
        check_lease_arguments(lease_key, owner, ttl_seconds)
        now = _now()
        with self._lock:
            current = self._leases.get(lease_key)
            if current is None:
                token = 1
            elif current.owner == owner and not current.expired(now):
                token = current.token
            elif current.expired(now):
                token = current.token + 1
            else:
                return None
            lease = ConversationLease(
                lease_key=lease_key,
                owner=owner,
                token=token,
                expires_at=lease_expiry(ttl_seconds, now),
            )
            self._leases[lease_key] = lease
            return lease

    def renew_lease(self, lease: ConversationLease, ttl_seconds: float) -> ConversationLease | None:
        if lease.owner is None:
            return None
        check_lease_arguments(lease.lease_key, lease.owner, ttl_seconds)
        with self._lock:
            current = self._leases.get(lease.lease_key)
            if current is None or current.owner != lease.owner or current.token != lease.token:
                return None
            renewed = current.model_copy(update={"expires_at": lease_expiry(ttl_seconds)})
            self._leases[lease.lease_key] = renewed
            return renewed

    def release_lease(self, lease: ConversationLease) -> bool:
        with self._lock:
            current = self._leases.get(lease.lease_key)
            if current is None or current.owner != lease.owner or current.token != lease.token:
                return False
            if lease.owner is None:
                return False
            self._leases[lease.lease_key] = current.model_copy(update={"owner": None})
            return True
