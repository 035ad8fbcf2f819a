"""The in-memory conversation store: records of one process, lost when it exits."""

from __future__ import annotations

import threading

from .spi import ConversationRecord, ConversationStore

__all__ = ["InMemoryConversationStore"]


class InMemoryConversationStore(ConversationStore):
    """A store for one process: records live in a dict guarded by a lock."""

    def __init__(self) -> None:
        self._records: dict[str, ConversationRecord] = {}
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
