"""The conformance kit's workspace-snapshot contracts against the AIO runtime on the AIO Sandbox
double, sync and async (through the thread bridge), on both command APIs
(docs/durability.md, docs/custom-runtime.md)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import to_async
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncSnapshotConformance, SnapshotConformance

CONVERSATIONS_ROOT = "/home/gem/workspace/conversations"


class _AioSnapshotHooks:
    """``fixture_name`` picks the double."""

    fixture_name: ClassVar[str] = ""
    double: AioDouble

    @pytest.fixture(autouse=True)
    def _bind_double(self, request: pytest.FixtureRequest) -> None:
        self.double = request.getfixturevalue(self.fixture_name)

    def conversations_root(self, tmp_path: Path) -> str:
        return CONVERSATIONS_ROOT

    def aio_runtime(self, conversation_id: str, conversations_root: str) -> AioSandboxSkillRuntime:
        return AioSandboxSkillRuntime(
            base_url=self.double.url,
            token=self.double.token,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
        )


class TestAioBashSnapshots(_AioSnapshotHooks, SnapshotConformance):
    """Every snapshot contract through ``/v1/bash/exec``."""

    fixture_name = "aio_bash"

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        return self.aio_runtime(conversation_id, conversations_root)


class TestAioShellSnapshots(_AioSnapshotHooks, SnapshotConformance):
    """Every snapshot contract through the ``/v1/shell`` fallback."""

    fixture_name = "aio_shell"

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        return self.aio_runtime(conversation_id, conversations_root)


class TestAioBashAsyncSnapshots(_AioSnapshotHooks, AsyncSnapshotConformance):
    """Every snapshot contract through ``AsyncWorkspaceSnapshots`` and the thread bridge."""

    fixture_name = "aio_bash"

    def make_async_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> AsyncSkillRuntime:
        return to_async(self.aio_runtime(conversation_id, conversations_root))


class TestAioShellAsyncSnapshots(_AioSnapshotHooks, AsyncSnapshotConformance):
    """Every snapshot contract through ``AsyncWorkspaceSnapshots`` and the ``/v1/shell``
    fallback."""

    fixture_name = "aio_shell"

    def make_async_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> AsyncSkillRuntime:
        return to_async(self.aio_runtime(conversation_id, conversations_root))
