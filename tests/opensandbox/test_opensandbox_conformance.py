"""The conformance kit against the OpenSandbox runtime, through the real SDK and the double.

Twice: with a conversation (a sandbox recorded per conversation, resumed by later runtime
objects) and without one (every runtime object owns a private sandbox whose ``remote_root`` is
its default working directory and holds the prepared copies).
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import RuntimeConformance, immutable_host_directory
from skillruntime.opensandbox import OpenSandboxSkillRuntime

ROOT = "/workspace/conversations"


class _OpenSandboxConformance(RuntimeConformance):
    """Shared hooks of both modes."""

    resolves_symlinks: ClassVar[bool] = False
    bounds_output_memory: ClassVar[bool] = True
    makes_unwritable_directories: ClassVar[bool] = True
    timeout_seconds: ClassVar[float] = 1.5
    large_file_bytes: ClassVar[int] = 20 * 1024 * 1024

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double
        self.store = InMemoryConversationStore()

    def conversations_root(self, tmp_path: Path) -> str:
        return ROOT

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        # An immutable directory stands in for a read-only volume: execd runs as root.
        assert isinstance(runtime, OpenSandboxSkillRuntime)
        assert runtime.sandbox_id is not None
        relative = posixpath.relpath(path, "/workspace")
        return immutable_host_directory(self.double.workspace_of(runtime.sandbox_id) / relative)


class TestOpenSandboxConformance(_OpenSandboxConformance):
    """Every contract of DESIGN §3 for ``OpenSandboxSkillRuntime`` with a conversation."""

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


class TestOpenSandboxWithoutConversation(_OpenSandboxConformance):
    """The contracts that hold without a conversation: a private sandbox per runtime object."""

    conversation_mode = False
    keeps_files_across_runtime_objects = False

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            remote_root=working_directory,
            base_environment=base_environment,
            deadline_grace_seconds=5.0,
        )

    def skills_directory(self, working_directory: str) -> str:
        return working_directory
