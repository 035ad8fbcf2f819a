"""Conversation store backends for the conformance suite: one class per kind of store.

A :class:`Backend` opens stores on one shared set of records: several SQL store objects on the
same table behave like several nodes; the in-memory backend hands out its single store.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from skillruntime.core.conversations.sql import SqlConversationStore

SERVICE = "http://sandbox.example:8080"


def unique_table() -> str:
    return f"conv_{uuid.uuid4().hex[:16]}"


class Backend:
    """Opens stores on one set of records and closes them all at the end."""

    kind = "memory"
    shared_across_processes = False

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._memory = InMemoryConversationStore()

    def open(self) -> ConversationStore:
        return self._memory

    def close(self) -> None:
        self._stack.close()


class SqlBackend(Backend):
    """Stores on one table of one database (created before the first store is handed out)."""

    shared_across_processes = True

    def __init__(self, kind: str, url: str, table_name: str | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.url = url
        self.table_name = table_name or unique_table()
        self.open().create_schema()

    def open(self, **options: Any) -> SqlConversationStore:
        store = SqlConversationStore(self.url, table_name=self.table_name, **options)
        self._stack.callback(store.close)
        return store


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'conversations.db'}"


def new_record(conversation_id: str = "conv-1", **fields: Any) -> ConversationRecord:
    record = ConversationRecord.new(
        service_key=SERVICE,
        conversation_id=conversation_id,
        runtime="opensandbox",
        workspace_root=f"/workspace/conversations/{conversation_id}",
        sandbox_id=fields.pop("sandbox_id", "sandbox-1"),
    )
    return record.with_changes(**fields) if fields else record
