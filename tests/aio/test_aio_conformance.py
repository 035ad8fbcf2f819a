"""The conformance kit, in full, against the AIO runtime and the AIO Sandbox double.

On an image with ``/v1/bash`` and on an older image where commands go through persistent
``/v1/shell`` sessions, each with a conversation and without one (a shared ``remote_root``
whose parent is the default working directory).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import RuntimeConformance, immutable_host_directory

CONVERSATIONS_ROOT = "/home/gem/workspace/conversations"


class _AioConformance(RuntimeConformance):
    """Shared hooks; ``fixture_name`` picks the double."""

    fixture_name: ClassVar[str] = ""
    # Remote paths are checked lexically; symlinks on the service are not resolved.
    resolves_symlinks = False
    makes_unwritable_directories = True
    timeout_seconds = 2.0
    double: AioDouble

    @pytest.fixture(autouse=True)
    def _bind_double(self, request: pytest.FixtureRequest) -> None:
        self.double = request.getfixturevalue(self.fixture_name)

    def conversations_root(self, tmp_path: Path) -> str:
        return CONVERSATIONS_ROOT

    def make_runtime(
        self,
        *,
        conversation_id: str,
        conversations_root: str,
        base_environment: Mapping[str, str],
    ) -> SkillRuntime:
        return AioSandboxSkillRuntime(
            base_url=self.double.url,
            token=self.double.token,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            base_environment=base_environment,
        )

    def make_runtime_without_conversation(
        self, *, working_directory: str, base_environment: Mapping[str, str]
    ) -> SkillRuntime:
        return AioSandboxSkillRuntime(
            base_url=self.double.url,
            token=self.double.token,
            remote_root=posixpath.join(working_directory, "skills"),
            base_environment=base_environment,
        )

    def backend_call_counter(self, runtime: SkillRuntime) -> Callable[[], int] | None:
        assert isinstance(runtime, AioSandboxSkillRuntime)
        client = runtime.client
        return lambda: client.request_count

    def make_directory_unwritable(self, runtime: SkillRuntime, path: str) -> Callable[[], None]:
        # Commands run as root in the double; an immutable directory refuses root too.
        return immutable_host_directory(self.double.host_path(path))


class TestAioBashConformance(_AioConformance):
    """Every contract of DESIGN §3 through ``/v1/bash/exec``."""

    fixture_name = "aio_bash"


class TestAioShellConformance(_AioConformance):
    """Every contract of DESIGN §3 through the ``/v1/shell`` fallback."""

    fixture_name = "aio_shell"


class TestAioBashWithoutConversation(_AioConformance):
    """The contracts without a conversation, through ``/v1/bash/exec``."""

    fixture_name = "aio_bash"
    conversation_mode = False


class TestAioShellWithoutConversation(_AioConformance):
    """The contracts without a conversation, through the ``/v1/shell`` fallback."""

    fixture_name = "aio_shell"
    conversation_mode = False
