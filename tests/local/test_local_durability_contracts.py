"""The conformance kit's automatic-durability contracts against the local runtime: the workspace
is lost when its directory is removed (a sweep, a node whose disk is gone)."""

from __future__ import annotations

import os
import shutil

from skillruntime.core.durability import Durability
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import DurabilityConformance
from skillruntime.local import LocalSkillRuntime


class TestLocalDurability(DurabilityConformance):
    """Every durability contract on the host file system."""

    def make_durable_runtime(
        self, *, conversation_id: str, conversations_root: str, durability: Durability
    ) -> SkillRuntime:
        return LocalSkillRuntime(
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            durability=durability,
        )

    def lose_workspace(
        self, *, conversation_id: str, conversations_root: str, sandbox_id: str | None
    ) -> None:
        shutil.rmtree(os.path.join(conversations_root, conversation_id))
