"""A node that dies (SIGKILL from the test) right after creating its candidate sandbox.

Usage: ``python dying_node.py '<json arguments>'`` with ``domain``, ``api_key``,
``conversation_id`` and ``store_url`` (a SQLite file shared with the test). The node opens the
conversation through a store whose ``create`` and ``update`` announce the sandbox they are about
to record (``CANDIDATE <id>`` on stdout) and then block, so the test can kill the node after its
candidate exists and before any record names it.
"""

from __future__ import annotations

import json
import sys
import threading

from skillruntime.core.conversations import ConversationRecord, ConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.opensandbox import OpenSandboxSkillRuntime


class BlockingStore(ConversationStore):
    """Reads go to the SQL store; the first write announces its sandbox id and never returns."""

    def __init__(self, inner: ConversationStore) -> None:
        self._inner = inner

    def get(self, storage_key: str) -> ConversationRecord | None:
        return self._inner.get(storage_key)

    def create(self, record: ConversationRecord) -> bool:
        return self._block(record)

    def update(self, record: ConversationRecord) -> bool:
        return self._block(record)

    def delete(self, storage_key: str) -> ConversationRecord | None:
        return self._inner.delete(storage_key)

    @staticmethod
    def _block(record: ConversationRecord) -> bool:
        sys.stdout.write(f"CANDIDATE {record.sandbox_id}\n")
        sys.stdout.flush()
        threading.Event().wait()  # until the test kills the process
        return False


def main() -> None:
    arguments = json.loads(sys.argv[1])
    store = BlockingStore(SqlConversationStore(arguments["store_url"]))
    runtime = OpenSandboxSkillRuntime(
        domain=arguments["domain"],
        api_key=arguments["api_key"],
        conversation_id=arguments["conversation_id"],
        conversation_store=store,
    )
    runtime.get_file_system().exists(".")


if __name__ == "__main__":
    main()
