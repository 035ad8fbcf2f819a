"""The ``local`` runtime's conversation reaper: expiry sweeps remove idle workspaces on this host.

:func:`~skillruntime.core.conversations.sweeps.sweep_conversations` asks the reaper of a record's
runtime to destroy what the record names once the conversation is idle and its record deleted;
the ``local`` plugin registers :class:`LocalWorkspaceReaper` through the
``skillruntime_conversation_reapers`` hook.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING

from skillruntime.core.conversations.guard_rules import local_service_key
from skillruntime.core.conversations.spi import ConversationRecord
from skillruntime.core.conversations.sweeps import OrphanSandbox
from skillruntime.core.runtime.workspace import (
    validate_conversation_id,
    validate_conversations_root,
)

if TYPE_CHECKING:
    from skillruntime.core.snapshots.spi import SnapshotStore

__all__ = ["LocalWorkspaceReaper"]

logger = logging.getLogger(__name__)


class LocalWorkspaceReaper:
    """Removes the workspace directories of ``local`` conversations on this host.

    A workspace is ``<workspace_root>/<conversation_id>`` of the record; the root must be an
    absolute path, the id valid, and the workspace a real directory (a symbolic link is never
    followed: it is removed itself). Local runtimes leave no orphans to report.

    :meth:`snapshot_workspace` snapshots a record's workspace through a local runtime, so that
    ``skillruntime conversations sweep --snapshot-store`` keeps it before the sweep removes it
    (docs/durability.md, "Before a sweep").
    """

    runtime = "local"

    @staticmethod
    def _here(record: ConversationRecord) -> tuple[str, str]:
        """The record's conversations root and id, refused unless they name this host."""
        root = validate_conversations_root(record.workspace_root)
        conversation_id = validate_conversation_id(record.conversation_id)
        if record.service_key != local_service_key(root):
            raise ValueError(
                f"the record of conversation {conversation_id} names another host's file system"
            )
        return root, conversation_id

    def snapshot_workspace(self, record: ConversationRecord, store: SnapshotStore) -> None:
        """Snapshot the record's workspace into ``store`` with
        :func:`~skillruntime.core.durability.automatic.snapshot_before_sweep`, through a local
        runtime without a conversation store (it must not write the record the sweep holds)."""
        from skillruntime.core.durability.automatic import Durability, snapshot_before_sweep

        from .runtime import LocalSkillRuntime

        root, conversation_id = self._here(record)
        step = snapshot_before_sweep(
            Durability(store),
            lambda _, durability: LocalSkillRuntime(
                conversation_id=conversation_id, conversations_root=root, durability=durability
            ),
        )
        step(record)

    def destroy(self, record: ConversationRecord) -> None:
        root, conversation_id = self._here(record)
        directory = os.path.join(root, conversation_id)
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(directory)
            return
        shutil.rmtree(directory)
        logger.info("removed the workspace of conversation %s", conversation_id)

    def orphans(self, records: Sequence[ConversationRecord]) -> list[OrphanSandbox]:
        return []

    def destroy_orphan(self, orphan: OrphanSandbox) -> None:
        raise ValueError("local workspaces have no orphans")
