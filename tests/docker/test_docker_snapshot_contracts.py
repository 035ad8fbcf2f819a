"""The conformance kit's workspace-snapshot contracts against the Docker runtime on the real
engine, sync and async (docs/durability.md, docs/custom-runtime.md)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

from docker_fixtures import IMAGE, ROOT, remove_labelled, suite_labels
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncSnapshotConformance, SnapshotConformance
from skillruntime.docker import AsyncDockerSkillRuntime, DockerSkillRuntime


class _DockerSnapshotHooks:
    """One deployment label and one conversation store per test; conversations under the
    image's workspace root."""

    @pytest.fixture(autouse=True)
    def _engine(self) -> Iterator[None]:
        self.run = f"snap-{uuid.uuid4().hex[:10]}"
        self.store = InMemoryConversationStore()
        yield
        remove_labelled(self.run)

    def conversations_root(self, tmp_path: object) -> str:
        return ROOT

    def options(self, **extra: object) -> dict[str, object]:
        return {"image": IMAGE, "labels": suite_labels(self.run), **extra}

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            runtime = DockerSkillRuntime(
                **self.options(  # type: ignore[arg-type]
                    conversation_id=conversation_id,
                    conversations_root=ROOT,
                    conversation_store=self.store,
                )
            )
            with contextlib.closing(runtime):
                runtime.destroy_conversation()


class TestDockerSnapshots(_DockerSnapshotHooks, SnapshotConformance):
    """Every snapshot contract through the sync Docker runtime."""

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        return DockerSkillRuntime(
            **self.options(  # type: ignore[arg-type]
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                conversation_store=self.store,
            )
        )


class TestDockerAsyncSnapshots(_DockerSnapshotHooks, AsyncSnapshotConformance):
    """Every snapshot contract through the async Docker runtime."""

    def make_async_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> AsyncSkillRuntime:
        return AsyncDockerSkillRuntime(
            **self.options(  # type: ignore[arg-type]
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                conversation_store=self.store,
            )
        )
