"""The conformance kit's async driver, cancellation contracts included, against the native
:class:`~skillruntime.aio.AsyncAioSkillRuntime` (httpx, no thread bridge), on both command APIs
of the AIO Sandbox double."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AsyncAioSkillRuntime
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import LoopThreadRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncRuntimeConformance, immutable_host_directory

CONVERSATIONS_ROOT = "/home/gem/workspace/conversations"


class _NativeAioAsyncConformance(AsyncRuntimeConformance):
    """Shared hooks; ``fixture_name`` picks the double."""

    fixture_name: ClassVar[str] = ""
    resolves_symlinks = False
    makes_unwritable_directories = True
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
        return AsyncAioSkillRuntime(
            base_url=self.double.url,
            token=self.double.token,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )

    def make_async_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> AsyncSkillRuntime:
        return AsyncAioSkillRuntime(
            base_url=self.double.url,
            token=self.double.token,
            remote_root=posixpath.join(working_directory, "skills"),
            base_environment=base_environment,
        )

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        # Commands run as root in the double; an immutable directory refuses root too.
        return immutable_host_directory(self.double.host_path(path))

    def backend_call_counter(self, runtime: SkillRuntime) -> Callable[[], int] | None:
        assert isinstance(runtime, LoopThreadRuntime)
        native = runtime.async_runtime
        assert isinstance(native, AsyncAioSkillRuntime)
        client = native.client
        return lambda: client.request_count


class TestNativeAioBashAsyncConformance(_NativeAioAsyncConformance):
    """Every contract through ``/v1/bash/exec``, natively async."""

    fixture_name = "aio_bash"


class TestNativeAioShellAsyncConformance(_NativeAioAsyncConformance):
    """Every contract through the ``/v1/shell`` fallback, natively async."""

    fixture_name = "aio_shell"


class TestNativeAioBashAsyncWithoutConversation(_NativeAioAsyncConformance):
    """The contracts without a conversation through ``/v1/bash/exec``, natively async."""

    fixture_name = "aio_bash"
    conversation_mode = False


class TestNativeAioShellAsyncWithoutConversation(_NativeAioAsyncConformance):
    """The contracts without a conversation through the ``/v1/shell`` fallback, natively async."""

    fixture_name = "aio_shell"
    conversation_mode = False
