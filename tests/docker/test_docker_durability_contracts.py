"""The conformance kit's automatic-durability contracts against the Docker runtime on the real
engine: the workspace is lost with the conversation's container and its volume."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

from docker_fixtures import IMAGE, ROOT, engine_client, remove_labelled, suite_labels
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import DurabilityConformance
from skillruntime.docker import DockerSkillRuntime


class TestDockerDurability(DurabilityConformance):
    """Every durability contract through the sync Docker runtime (the async face is the same
    runtime through the thread bridge)."""

    @pytest.fixture(autouse=True)
    def _engine(self) -> Iterator[None]:
        self.run = f"durable-{uuid.uuid4().hex[:10]}"
        self.store = InMemoryConversationStore()
        yield
        remove_labelled(self.run)

    def conversations_root(self, tmp_path: object) -> str:
        return ROOT

    def make_durable_runtime(
        self, *, conversation_id: str, conversations_root: str, durability: Durability
    ) -> SkillRuntime:
        return DockerSkillRuntime(
            image=IMAGE,
            labels=suite_labels(self.run),
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            conversation_store=self.store,
            durability=durability,
        )

    def lose_workspace(
        self, *, conversation_id: str, conversations_root: str, sandbox_id: str | None
    ) -> None:
        client = engine_client()
        try:
            selector = {"label": f"skillruntime-conversation-id={conversation_id}"}
            for container in client.containers.list(all=True, filters=selector):
                container.remove(force=True)
            for volume in client.volumes.list(filters=selector):
                volume.remove(force=True)
        finally:
            client.close()

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            runtime = DockerSkillRuntime(
                image=IMAGE,
                labels=suite_labels(self.run),
                conversation_id=conversation_id,
                conversations_root=ROOT,
                conversation_store=self.store,
            )
            with contextlib.closing(runtime):
                runtime.destroy_conversation()
