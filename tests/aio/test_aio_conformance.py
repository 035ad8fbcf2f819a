"""The conformance kit, in full, against the AIO runtime and the AIO Sandbox double.

Twice: once on an image with ``/v1/bash`` and once on an older image where commands go through
persistent ``/v1/shell`` sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.runtime import SkillRuntime
from skillruntime.core.testing import RuntimeConformance

CONVERSATIONS_ROOT = "/home/gem/workspace/conversations"


class _AioConformance(RuntimeConformance):
    """Shared hooks; ``fixture_name`` picks the double."""

    fixture_name: ClassVar[str] = ""
    # Remote paths are checked lexically; symlinks on the service are not resolved.
    resolves_symlinks = False
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

    def backend_call_counter(self, runtime: SkillRuntime) -> Callable[[], int] | None:
        assert isinstance(runtime, AioSandboxSkillRuntime)
        client = runtime.client
        return lambda: client.request_count


class TestAioBashConformance(_AioConformance):
    """Every contract of DESIGN §3 through ``/v1/bash/exec``."""

    fixture_name = "aio_bash"


class TestAioShellConformance(_AioConformance):
    """Every contract of DESIGN §3 through the ``/v1/shell`` fallback."""

    fixture_name = "aio_shell"
