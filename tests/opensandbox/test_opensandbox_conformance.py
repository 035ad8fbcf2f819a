"""The conformance kit against the OpenSandbox runtime, through the real SDK and the double."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.runtime import SkillRuntime
from skillruntime.core.testing import RuntimeConformance
from skillruntime.opensandbox import OpenSandboxSkillRuntime


class TestOpenSandboxConformance(RuntimeConformance):
    """Every contract of DESIGN §3 for ``OpenSandboxSkillRuntime``."""

    resolves_symlinks: ClassVar[bool] = False
    bounds_output_memory: ClassVar[bool] = True
    timeout_seconds: ClassVar[float] = 1.5
    large_file_bytes: ClassVar[int] = 20 * 1024 * 1024

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double
        self.store = InMemoryConversationStore()

    def make_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> SkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
            conversation_store=self.store,
            deadline_grace_seconds=5.0,
        )

    def conversations_root(self, tmp_path: Path) -> str:
        return "/workspace/conversations"

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            runtime = OpenSandboxSkillRuntime(
                domain=self.double.domain,
                api_key=self.double.api_key,
                conversation_id=conversation_id,
                conversations_root="/workspace/conversations",
                conversation_store=self.store,
            )
            with contextlib.closing(runtime):
                runtime.destroy_conversation_sandbox()
