"""Subprocess worker for the multi-process race on one conversation.

Usage: python conversation_race_worker.py URL TABLE INDEX MODE. The worker prints ``ready``
and waits for a line on stdin; then it tries to create the shared conversation with its own
sandbox id, adds its own prepared skill through ``modify_record`` and prints a JSON line
``{"created": bool, "version": int}``. MODE ``warm`` opens a ``SqlConversationStore`` (and
connects) before the start signal; ``fresh`` opens the store through ``open_conversation_store``
after the signal with ``create_schema=True``, so the processes also race on creating the table
(and, for SQLite, the database file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest's pythonpath

from conversations.conversation_backends import new_record
from skillruntime.core.conversations import (
    ConversationStore,
    modify_record,
    open_conversation_store,
)
from skillruntime.core.conversations.sql import SqlConversationStore


def main() -> None:
    url, table, index, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    record = new_record(sandbox_id=f"sandbox-{index}")
    store: ConversationStore
    if mode == "warm":
        store = SqlConversationStore(url, table_name=table)
        store.get(record.storage_key)  # connect before the start signal
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("never told to go")
    if mode == "fresh":
        store = open_conversation_store(url, table_name=table, create_schema=True)
    with store:
        created = store.create(record)
        stored = modify_record(
            store,
            record.storage_key,
            lambda current: current.with_prepared_skill(f"digest-{index}", f"/skills/{index}"),
        )
    if stored is None:
        raise SystemExit("the record vanished")
    print(json.dumps({"created": created, "version": stored.version}), flush=True)


if __name__ == "__main__":
    main()
