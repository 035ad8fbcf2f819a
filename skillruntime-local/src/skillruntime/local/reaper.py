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

from skillruntime.core.conversations.guard_rules import local_service_key
from skillruntime.core.conversations.spi import ConversationRecord
from skillruntime.core.conversations.sweeps import OrphanSandbox
from skillruntime.core.runtime.workspace import (
    validate_conversation_id,
    validate_conversations_root,
)

__all__ = ["LocalWorkspaceReaper"]

logger = logging.getLogger(__name__)


class LocalWorkspaceReaper:
    """Removes the workspace directories of ``local`` conversations on this host.

    A workspace is ``<workspace_root>/<conversation_id>`` of the record; the root must be an
    absolute path, the id valid, and the workspace a real directory (a symbolic link is never
    followed: it is removed itself). Local runtimes leave no orphans to report.
    """

    runtime = "local"

    def destroy(self, record: ConversationRecord) -> None:
        root = validate_conversations_root(record.workspace_root)
        conversation_id = validate_conversation_id(record.conversation_id)
        if record.service_key != local_service_key(root):
            raise ValueError(
                f"the record of conversation {conversation_id} names another host's file system"
            )
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
