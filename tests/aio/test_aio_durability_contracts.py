"""The conformance kit's automatic-durability contracts against the AIO runtime on its double:
the workspace is lost when its directory in the service is removed."""

from __future__ import annotations

import posixpath

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.durability import Durability
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import DurabilityConformance

ROOT = "/tmp/aio-durability-kit"


class TestAioDurability(DurabilityConformance):
    """Every durability contract through the sync AIO runtime."""

    double: AioDouble

    @pytest.fixture(autouse=True)
    def _double(self, aio_bash: AioDouble) -> None:
        self.double = aio_bash

    def conversations_root(self, tmp_path: object) -> str:
        return ROOT

    def make_durable_runtime(
        self, *, conversation_id: str, conversations_root: str, durability: Durability
    ) -> SkillRuntime:
        return AioSandboxSkillRuntime(
            base_url=self.double.url,
            token=self.double.token,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            durability=durability,
        )

    def lose_workspace(
        self, *, conversation_id: str, conversations_root: str, sandbox_id: str | None
    ) -> None:
        with AioSandboxSkillRuntime(base_url=self.double.url, token=self.double.token) as plain:
            directory = posixpath.join(conversations_root, conversation_id)
            gone = plain.execute(SkillExecutionRequest(command=f"rm -rf -- '{directory}'"))
            assert gone.ok, gone.stderr
