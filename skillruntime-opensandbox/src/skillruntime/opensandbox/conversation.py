"""The conversation record of an OpenSandbox runtime: which sandbox, which prepared skills.

Every change is a compare-and-set on the record's version through
:func:`~skillruntime.core.conversations.modify_record`, which re-reads and retries on conflict, so
two nodes preparing different skills both keep theirs and a sandbox replacement decided by one
node is seen, not overwritten, by the others (DESIGN §5).
"""

from __future__ import annotations

import logging

from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStore,
    ConversationStoreError,
    modify_record,
    storage_key_for,
)

__all__ = ["ConversationBinding"]

logger = logging.getLogger(__name__)


class ConversationBinding:
    """One conversation's record in a store, with the changes the runtime makes to it."""

    def __init__(
        self,
        store: ConversationStore,
        *,
        service_key: str,
        conversation_id: str,
        runtime_name: str,
        workspace_root: str,
    ) -> None:
        self.store = store
        self.service_key = service_key
        self.conversation_id = conversation_id
        self.runtime_name = runtime_name
        self.workspace_root = workspace_root
        self.storage_key = storage_key_for(service_key, conversation_id)

    def load(self) -> ConversationRecord | None:
        """The stored record (``None`` when there is none); checks it belongs to this runtime."""
        record = self.store.get(self.storage_key)
        if record is not None and record.workspace_root != self.workspace_root:
            raise ConversationStoreError(
                f"conversation {self.conversation_id} is recorded with workspace root "
                f"{record.workspace_root}, not {self.workspace_root}; one conversation must keep "
                "one conversations_root"
            )
        return record

    def create(self, sandbox_id: str) -> bool:
        """Insert the first record naming ``sandbox_id``; ``False`` when another node won."""
        record = ConversationRecord.new(
            service_key=self.service_key,
            conversation_id=self.conversation_id,
            runtime=self.runtime_name,
            workspace_root=self.workspace_root,
            sandbox_id=sandbox_id,
        )
        return self.store.create(record)

    def replace_sandbox(self, old_id: str | None, new_id: str) -> ConversationRecord | None:
        """Point the record at ``new_id`` if it still names ``old_id``; forget prepared skills.

        Returns the record as stored afterwards (it names another sandbox when a different node
        replaced it first), or ``None`` when the record is gone.
        """

        def change(current: ConversationRecord) -> ConversationRecord | None:
            if current.sandbox_id != old_id:
                return None
            return current.with_changes(
                sandbox_id=new_id, prepared_skills={}, workspace_ready=False
            )

        return modify_record(self.store, self.storage_key, change)

    def add_prepared(
        self, sandbox_id: str, digest: str, base_path: str
    ) -> ConversationRecord | None:
        """Record ``digest`` as prepared at ``base_path`` in ``sandbox_id`` (kept if present)."""

        def change(current: ConversationRecord) -> ConversationRecord | None:
            if current.sandbox_id != sandbox_id:
                return None
            if current.prepared_skills.get(digest) == base_path:
                return None
            return current.with_prepared_skill(digest, base_path)

        return modify_record(self.store, self.storage_key, change)

    def mark_workspace_ready(self, sandbox_id: str) -> ConversationRecord | None:
        """Record that the workspace directory exists in ``sandbox_id``."""

        def change(current: ConversationRecord) -> ConversationRecord | None:
            if current.sandbox_id != sandbox_id or current.workspace_ready:
                return None
            return current.with_changes(workspace_ready=True)

        return modify_record(self.store, self.storage_key, change)

    def delete(self) -> ConversationRecord | None:
        """Remove the record and return it (``None`` when there was none)."""
        return self.store.delete(self.storage_key)
