"""The conformance kit's async driver, cancellation contracts included, against the AIO runtime
served through the thread bridge, on both command APIs of the AIO Sandbox double."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import LoopThreadRuntime, ThreadedAsyncRuntime, to_async
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncRuntimeConformance

CONVERSATIONS_ROOT = "/home/gem/workspace/conversations"


class _AioAsyncConformance(AsyncRuntimeConformance):
    """Shared hooks; ``fixture_name`` picks the double."""

    fixture_name: ClassVar[str] = ""
    resolves_symlinks = False
    timeout_seconds = 2.0
    double: AioDouble

    @pytest.fixture(autouse=True)
    def _bind_double(self, request: pytest.FixtureRequest) -> None:
        self.double = request.getfixturevalue(self.fixture_name)

    def conversations_root(self, tmp_path: Path) -> str:
        return CONVERSATIONS_ROOT

    def make_async_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> AsyncSkillRuntime:
        return to_async(
            AioSandboxSkillRuntime(
                base_url=self.double.url,
                token=self.double.token,
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                base_environment=base_environment,
            )
        )

    def backend_call_counter(self, runtime: SkillRuntime) -> Callable[[], int] | None:
        assert isinstance(runtime, LoopThreadRuntime)
        bridged = runtime.async_runtime
        assert isinstance(bridged, ThreadedAsyncRuntime)
        sync_runtime = bridged.sync_runtime
        assert isinstance(sync_runtime, AioSandboxSkillRuntime)
        client = sync_runtime.client
        return lambda: client.request_count


class TestAioBashAsyncConformance(_AioAsyncConformance):
    """Every contract through ``/v1/bash/exec``, driven from asyncio."""

    fixture_name = "aio_bash"


class TestAioShellAsyncConformance(_AioAsyncConformance):
    """Every contract through the ``/v1/shell`` fallback, driven from asyncio."""

    fixture_name = "aio_shell"
