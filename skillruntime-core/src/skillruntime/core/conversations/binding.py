"""A remote runtime's conversation record: which sandbox (or container), which prepared skills.

Shared by the runtimes that keep a conversation's sandbox in a
:class:`~skillruntime.core.conversations.ConversationStore` (``opensandbox``, ``docker``);
:func:`resolve_conversation_store` turns their ``conversation_store`` argument into a store.

Every change is a compare-and-set on the record's version through
:func:`~skillruntime.core.conversations.modify_record`, which re-reads and retries on conflict, so
two nodes preparing different skills both keep theirs and a sandbox replacement decided by one
node is seen, not overwritten, by the others (``docs/conversation-stores.md``, "Multi-node
guarantees").
"""

from __future__ import annotations

import logging

from .spi import (
    ConversationRecord,
    ConversationStore,
    ConversationStoreError,
    modify_record,
    open_conversation_store,
    storage_key_for,
)

__all__ = ["ConversationBinding", "check_conversation_arguments", "resolve_conversation_store"]

logger = logging.getLogger(__name__)


def check_conversation_arguments(
    *,
    conversation: bool,
    conversation_store: object,
    exclusive: bool,
    orphan_grace_seconds: float,
) -> None:
    """Check a remote runtime's conversation arguments (``conversation``: it has one).

    Raises :class:`ValueError` for a ``conversation_store`` or ``exclusive=True`` without a
    conversation, and for a negative ``orphan_grace_seconds``.
    """
    if conversation_store is not None and not conversation:
        raise ValueError("conversation_store needs a conversation_id")
    if exclusive and not conversation:
        raise ValueError("exclusive=True needs a conversation_id")
    if orphan_grace_seconds < 0:
        raise ValueError("orphan_grace_seconds must not be negative")


def resolve_conversation_store(
    conversation_store: ConversationStore | str | None, default: ConversationStore
) -> ConversationStore:
    """The store a runtime uses: ``default`` when unset, one opened from a URL, or the store.

    A store opened from a URL belongs to the runtime (it closes it); the caller tells that by
    ``isinstance(conversation_store, str)``.
    """
    if conversation_store is None:
        return default
    if isinstance(conversation_store, str):
        return open_conversation_store(conversation_store)
    return conversation_store


class ConversationBinding:
    """One conversation's record in a store, with the changes the runtime makes to it.

    ``mismatch_error`` is the exception :meth:`load` raises (with a message) when the record
    was written with another workspace root. ``durable``: the runtime keeps workspace snapshots
    (docs/durability.md), so a record it creates, and a sandbox it swaps in, is marked
    ``restore_pending`` until the workspace has been checked against the last snapshot.
    """

    def __init__(
        self,
        store: ConversationStore,
        *,
        service_key: str,
        conversation_id: str,
        runtime_name: str,
        workspace_root: str,
        mismatch_error: type[Exception] = ConversationStoreError,
        durable: bool = False,
    ) -> None:
        self.store = store
        self.durable = durable
        self.service_key = service_key
        self.conversation_id = conversation_id
        self.runtime_name = runtime_name
        self.workspace_root = workspace_root
        self.storage_key = storage_key_for(service_key, conversation_id)
        self._mismatch_error = mismatch_error

    def load(self) -> ConversationRecord | None:
        """The stored record (``None`` when there is none); checks it belongs to this runtime."""
        record = self.store.get(self.storage_key)
        if record is not None and record.workspace_root != self.workspace_root:
            raise self._mismatch_error(
                f"conversation {self.conversation_id} is recorded with workspace root "
                f"{record.workspace_root}, not {self.workspace_root}; one conversation must keep "
                "one conversations_root"
            )
        return record

    def names(self, sandbox_id: str) -> bool:
        """Whether the stored record names ``sandbox_id`` (reads the store, checks nothing)."""
        record = self.store.get(self.storage_key)
        return record is not None and record.sandbox_id == sandbox_id

    def create(self, sandbox_id: str, *, sandbox_storage: str | None = None) -> bool:
        """Insert the first record naming ``sandbox_id`` (and ``sandbox_storage``, where its
        persistent storage lives when not the runtime's default); ``False`` when another node
        won."""
        record = ConversationRecord.new(
            service_key=self.service_key,
            conversation_id=self.conversation_id,
            runtime=self.runtime_name,
            workspace_root=self.workspace_root,
            sandbox_id=sandbox_id,
            restore_pending=self.durable,
            sandbox_storage=sandbox_storage,
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
                sandbox_id=new_id,
                prepared_skills={},
                workspace_ready=False,
                restore_pending=self.durable or current.snapshot_id is not None,
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

    def restore_checked(
        self, sandbox_id: str, snapshot_id: str | None
    ) -> ConversationRecord | None:
        """Clear ``restore_pending`` of the record if it still names ``sandbox_id`` (the workspace
        there was checked, and restored to ``snapshot_id`` when that is given)."""

        def change(current: ConversationRecord) -> ConversationRecord | None:
            if current.sandbox_id != sandbox_id or not current.restore_pending:
                return None
            return current.with_changes(
                restore_pending=False, snapshot_id=snapshot_id or current.snapshot_id
            )

        return modify_record(self.store, self.storage_key, change)

    def snapshot_taken(self, snapshot_id: str) -> ConversationRecord | None:
        """Record ``snapshot_id`` as the conversation's last good snapshot (whatever sandbox
        the record names: the snapshot holds the files, not the sandbox)."""

        def change(current: ConversationRecord) -> ConversationRecord | None:
            if current.snapshot_id == snapshot_id:
                return None
            return current.with_changes(snapshot_id=snapshot_id)

        return modify_record(self.store, self.storage_key, change)

    def delete(self) -> ConversationRecord | None:
        """Remove the record and return it (``None`` when there was none)."""
        return self.store.delete(self.storage_key)
