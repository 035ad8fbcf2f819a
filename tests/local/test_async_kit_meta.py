"""The cancellation contracts fail for runtimes that do not kill a cancelled command."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import to_async
from skillruntime.core.testing import AsyncRuntimeConformance, CancellationContracts
from skillruntime.core.testing.context import ConformanceContext
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

CANCELLATION_TESTS = sorted(
    name for name in CancellationContracts.__dict__ if name.startswith("test_")
)


class ShieldedLocal(AsyncLocalSkillRuntime):
    """Lets a cancelled command run on (the bug the contracts catch)."""

    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        return await asyncio.shield(super()._run(request, working_directory, environment))


class _Suite(AsyncRuntimeConformance):
    kill_settle_seconds = 0.5
    variant: ClassVar[str] = "native"

    def make_async_runtime(
        self, *, conversation_id: str, conversations_root: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        if self.variant == "bridge-without-kill":
            return to_async(
                LocalSkillRuntime(
                    conversation_id=conversation_id,
                    conversations_root=conversations_root,
                    base_environment=base_environment,
                ),
                kill_on_cancel=False,
            )
        runtime_class = ShieldedLocal if self.variant == "shielded" else AsyncLocalSkillRuntime
        return runtime_class(
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )


def _outcome(variant: str, test_name: str, tmp_path: Path) -> str:
    suite = type(f"Suite_{variant}", (_Suite,), {"variant": variant})()
    with ConformanceContext(suite, tmp_path) as context:
        try:
            getattr(suite, test_name)(context)
        except (AssertionError, pytest.fail.Exception):
            return "failed"
    return "passed"


@pytest.mark.parametrize("test_name", CANCELLATION_TESTS)
@pytest.mark.parametrize("variant", ["shielded", "bridge-without-kill"])
def test_a_runtime_that_lets_cancelled_commands_run_fails_the_contract(
    variant: str, test_name: str, tmp_path: Path
) -> None:
    assert _outcome(variant, test_name, tmp_path) == "failed"


@pytest.mark.parametrize("test_name", CANCELLATION_TESTS)
def test_the_bridge_with_kill_on_cancel_passes_the_contract(
    test_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bridged(
        self: _Suite,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> AsyncSkillRuntime:
        return to_async(
            LocalSkillRuntime(
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                base_environment=base_environment,
            )
        )

    monkeypatch.setattr(_Suite, "make_async_runtime", bridged)
    assert _outcome("bridge", test_name, tmp_path) == "passed"
