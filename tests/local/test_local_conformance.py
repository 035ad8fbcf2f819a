"""The conformance kit, in full, against the local runtime."""

from __future__ import annotations

from collections.abc import Mapping

from skillruntime.core.runtime import SkillRuntime
from skillruntime.core.testing import RuntimeConformance
from skillruntime.local import LocalSkillRuntime


class TestLocalRuntimeConformance(RuntimeConformance):
    """Every contract of DESIGN §3; the local runtime also resolves symlinks in workspaces."""

    resolves_symlinks = True

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
