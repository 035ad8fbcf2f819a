"""The conformance kit, in full, against the native async local runtime (async driver), in the
three modes of the sync runtime: a conversation workspace, a work root, and in place."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping

from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncRuntimeConformance, immutable_host_directory
from skillruntime.local import AsyncLocalSkillRuntime


class _AsyncLocalConformance(AsyncRuntimeConformance):
    """Shared hooks; the local runtime also resolves symlinks in workspaces."""

    resolves_symlinks = True
    makes_unwritable_directories = True

    def make_async_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> AsyncSkillRuntime:
        return AsyncLocalSkillRuntime(
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        return immutable_host_directory(path)


class TestAsyncLocalRuntimeConformance(_AsyncLocalConformance):
    """Every contract of DESIGN §3 plus the cancellation contracts, with a conversation."""


class TestAsyncLocalRuntimeWithWorkRoot(_AsyncLocalConformance):
    """Without a conversation: the work root is the default directory and holds ``skills/``."""

    conversation_mode = False

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        return AsyncLocalSkillRuntime(
            work_root=working_directory, base_environment=base_environment
        )


class TestAsyncLocalRuntimeInPlace(_AsyncLocalConformance):
    """Neither conversation nor work root: skills are prepared where they are."""

    conversation_mode = False
    prepares_in_place = True
    resumes_prepared_skills = False

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        os.makedirs(working_directory, exist_ok=True)
        with contextlib.chdir(working_directory):
            return AsyncLocalSkillRuntime(base_environment=base_environment)
