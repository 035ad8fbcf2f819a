"""The conformance kit's automatic-durability contracts against the OpenSandbox runtime on the
protocol double: the workspace is lost with its sandbox, killed behind the runtime's back."""

from __future__ import annotations

import contextlib

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import DurabilityConformance
from skillruntime.opensandbox import OpenSandboxSkillRuntime

ROOT = "/workspace/conversations"


class TestOpenSandboxDurability(DurabilityConformance):
    """Every durability contract through the sync OpenSandbox runtime."""

    double: OpenSandboxDouble
    store: InMemoryConversationStore

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double
        self.store = InMemoryConversationStore()

    def conversations_root(self, tmp_path: object) -> str:
        return ROOT

    def make_durable_runtime(
        self, *, conversation_id: str, conversations_root: str, durability: Durability
    ) -> SkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            conversation_store=self.store,
            durability=durability,
        )

    def lose_workspace(
        self, *, conversation_id: str, conversations_root: str, sandbox_id: str | None
    ) -> None:
        assert sandbox_id is not None
        assert self.double.kill_behind_back(sandbox_id)

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            runtime = OpenSandboxSkillRuntime(
                domain=self.double.domain,
                api_key=self.double.api_key,
                conversation_id=conversation_id,
                conversations_root=ROOT,
                conversation_store=self.store,
            )
            with contextlib.closing(runtime):
                runtime.destroy_conversation_sandbox()
