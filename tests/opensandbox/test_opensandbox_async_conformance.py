"""The conformance kit's async driver, cancellation contracts included, against the native async
OpenSandbox runtime on the double."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.testing import AsyncRuntimeConformance
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

CONVERSATIONS_ROOT = "/workspace/conversations"


class TestOpenSandboxAsyncConformance(AsyncRuntimeConformance):
    """Every contract of DESIGN §3 plus the cancellation contracts, driven from asyncio."""

    resolves_symlinks: ClassVar[bool] = False
    timeout_seconds: ClassVar[float] = 1.5

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double
        self.store = InMemoryConversationStore()

    def make_async_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> AsyncSkillRuntime:
        return AsyncOpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
            conversation_store=self.store,
            deadline_grace_seconds=5.0,
        )

    def conversations_root(self, tmp_path: Path) -> str:
        return CONVERSATIONS_ROOT

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            runtime = OpenSandboxSkillRuntime(
                domain=self.double.domain,
                api_key=self.double.api_key,
                conversation_id=conversation_id,
                conversations_root=CONVERSATIONS_ROOT,
                conversation_store=self.store,
            )
            with contextlib.closing(runtime):
                runtime.destroy_conversation_sandbox()


class TestOpenSandboxAsyncWithoutConversation(AsyncRuntimeConformance):
    """The contracts that hold without a conversation (a private sandbox per runtime object),
    driven from asyncio."""

    resolves_symlinks: ClassVar[bool] = False
    timeout_seconds: ClassVar[float] = 1.5
    conversation_mode = False
    keeps_files_across_runtime_objects = False

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double

    def conversations_root(self, tmp_path: Path) -> str:
        return CONVERSATIONS_ROOT

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        return AsyncOpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            remote_root=working_directory,
            base_environment=base_environment,
            deadline_grace_seconds=5.0,
        )

    def skills_directory(self, working_directory: str) -> str:
        return working_directory
