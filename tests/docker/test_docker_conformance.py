"""The conformance kit against the Docker runtime on the real engine, sync and async, with a
conversation (container and volume per conversation, resumed by later runtime objects) and
without one (a private container per runtime object)."""

from __future__ import annotations

import contextlib
import shlex
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from docker_fixtures import IMAGE, ROOT, remove_labelled, suite_labels
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncRuntimeConformance, RuntimeConformance
from skillruntime.docker import AsyncDockerSkillRuntime, DockerSkillRuntime


class _DockerHooks:
    """Hooks shared by every mode: one deployment label and one store per test."""

    resolves_symlinks: ClassVar[bool] = False
    timeout_seconds: ClassVar[float] = 1.5
    makes_unwritable_directories: ClassVar[bool] = True

    @pytest.fixture(autouse=True)
    def _engine(self) -> Iterator[None]:
        self.run = f"kit-{uuid.uuid4().hex[:10]}"
        self.store = InMemoryConversationStore()
        yield
        remove_labelled(self.run)

    def conversations_root(self, tmp_path: Path) -> str:
        return ROOT

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        # Commands run as the image's non-root user, who owns the directory: its mode decides.
        def chmod(mode: str) -> None:
            result = runtime.execute(
                SkillExecutionRequest(command=f"chmod {mode} {shlex.quote(path)}")
            )
            assert result.exit_code == 0, result.stderr

        chmod("a-w")
        return lambda: chmod("u+w")

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


class TestDockerConformance(_DockerHooks, RuntimeConformance):
    """Every contract with a conversation."""

    def make_runtime(
        self, *, conversation_id: str, conversations_root: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        return DockerSkillRuntime(
            **self.options(  # type: ignore[arg-type]
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                base_environment=base_environment,
                conversation_store=self.store,
            )
        )


class TestDockerWithoutConversation(_DockerHooks, RuntimeConformance):
    """The contracts without a conversation: a private container per runtime object."""

    conversation_mode = False
    keeps_files_across_runtime_objects = False

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        return DockerSkillRuntime(
            **self.options(  # type: ignore[arg-type]
                remote_root=working_directory, base_environment=base_environment
            )
        )

    def skills_directory(self, working_directory: str) -> str:
        return working_directory


class TestDockerAsyncConformance(_DockerHooks, AsyncRuntimeConformance):
    """Every contract plus cancellation and event-loop contracts, from asyncio."""

    def make_async_runtime(
        self, *, conversation_id: str, conversations_root: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        return AsyncDockerSkillRuntime(
            **self.options(
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                base_environment=base_environment,
                conversation_store=self.store,
            )
        )


class TestDockerAsyncWithoutConversation(_DockerHooks, AsyncRuntimeConformance):
    """The contracts without a conversation, from asyncio."""

    conversation_mode = False
    keeps_files_across_runtime_objects = False

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        return AsyncDockerSkillRuntime(
            **self.options(remote_root=working_directory, base_environment=base_environment)
        )

    def skills_directory(self, working_directory: str) -> str:
        return working_directory
