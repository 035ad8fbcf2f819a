"""The conformance kit, in full, against the local runtime in its three modes: a conversation
workspace, a work root, and in place (neither: skills are used where they are and the default
working directory is the process's working directory when the runtime was built)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping

from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import RuntimeConformance, immutable_host_directory
from skillruntime.local import LocalSkillRuntime


class _LocalConformance(RuntimeConformance):
    """Shared hooks; the local runtime also resolves symlinks in workspaces."""

    resolves_symlinks = True
    makes_unwritable_directories = True

    def make_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> SkillRuntime:
        return LocalSkillRuntime(
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        return immutable_host_directory(path)


class TestLocalRuntimeConformance(_LocalConformance):
    """Every contract of DESIGN §3 with a conversation workspace."""


class TestLocalRuntimeWithWorkRoot(_LocalConformance):
    """Without a conversation: the work root is the default directory and holds ``skills/``."""

    conversation_mode = False

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        return LocalSkillRuntime(work_root=working_directory, base_environment=base_environment)


class TestLocalRuntimeInPlace(_LocalConformance):
    """Neither conversation nor work root: built in ``working_directory`` as the process's
    working directory, preparing skills where they are."""

    conversation_mode = False
    prepares_in_place = True
    resumes_prepared_skills = False

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        os.makedirs(working_directory, exist_ok=True)
        with contextlib.chdir(working_directory):
            return LocalSkillRuntime(base_environment=base_environment)
