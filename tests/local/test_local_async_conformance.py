"""The conformance kit, in full, against the native async local runtime (async driver)."""

from __future__ import annotations

from collections.abc import Mapping

from skillruntime.core.async_runtime import AsyncSkillRuntime
from skillruntime.core.testing import AsyncRuntimeConformance
from skillruntime.local import AsyncLocalSkillRuntime


class TestAsyncLocalRuntimeConformance(AsyncRuntimeConformance):
    """Every contract of DESIGN §3 plus the cancellation contracts."""

    resolves_symlinks = True

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
