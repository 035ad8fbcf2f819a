"""The event-loop contracts of the async kit fail for a runtime that keeps loop-bound state and
pass for one that serves any loop (the thread bridge over the kit's reference runtime)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import pytest

from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import ThreadedAsyncRuntime
from skillruntime.core.testing import ConformanceContext, EventLoopContracts
from skillruntime.core.testing.async_suite import AsyncRuntimeConformance

LOOP_TESTS = sorted(name for name in EventLoopContracts.__dict__ if name.startswith("test_"))


def _load(name: str) -> ModuleType:
    module_name = f"skillruntime_tests_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(
        module_name, Path(__file__).with_name(f"{name}.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


reference = _load("kit_reference")


class LoopBoundRuntime(ThreadedAsyncRuntime):
    """Serialises every call with one ``asyncio.Lock`` made in ``__init__``: the lock binds to
    the loop of its first waiter, so contended calls on a later loop raise ``RuntimeError``
    (the defect the contracts catch)."""

    def __init__(self, runtime: reference.ReferenceRuntime) -> None:
        super().__init__(runtime)
        self._one_at_a_time = asyncio.Lock()

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        async with self._one_at_a_time:
            return await super().execute(request)

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        async with self._one_at_a_time:
            return await super().prepare(request)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        async with self._one_at_a_time:
            return await super().get_file_system()


class _Suite(AsyncRuntimeConformance):
    loop_bound: ClassVar[bool] = False

    def make_async_runtime(
        self, *, conversation_id: str, conversations_root: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        inner = reference.ReferenceRuntime(
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )
        return LoopBoundRuntime(inner) if self.loop_bound else ThreadedAsyncRuntime(inner)


def _outcome(loop_bound: bool, test_name: str, tmp_path: Path) -> str:
    suite = type("Suite", (_Suite,), {"loop_bound": loop_bound})()
    with ConformanceContext(suite, tmp_path) as context:
        try:
            getattr(suite, test_name)(context)
        except (AssertionError, RuntimeError, pytest.fail.Exception):
            return "failed"
    return "passed"


@pytest.mark.parametrize("test_name", LOOP_TESTS)
def test_a_runtime_with_loop_bound_state_fails_the_contract(test_name: str, tmp_path: Path) -> None:
    assert _outcome(True, test_name, tmp_path) == "failed"


@pytest.mark.parametrize("test_name", LOOP_TESTS)
def test_a_runtime_that_serves_any_loop_passes_the_contract(test_name: str, tmp_path: Path) -> None:
    assert _outcome(False, test_name, tmp_path) == "passed"
