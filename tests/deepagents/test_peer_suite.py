"""langchain-tests' ``SandboxIntegrationTests`` against :class:`SkillRuntimeBackend` on the local
runtime, the OpenSandbox double and the AIO double (``/v1/bash`` and ``/v1/shell``).

Each backend works inside a conversation workspace, so every suite path is checked by the
runtime's workspace rules too. Async methods are native on every backend: an
``AsyncSkillRuntime`` on the same conversation (on OpenSandbox it shares the sync runtime's
conversation store, so both attach the one sandbox). The replaced tests are in
``deepagents_peer.OVERRIDDEN``.

The async runtime is built once per class by the sync ``sandbox`` fixture, outside any event
loop, and every async test runs on a fresh loop (no loop is pinned), the way an application
builds a backend once and calls ``asyncio.run`` again and again. It is closed on a loop of its
own at the end of the class.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from deepagents_peer import SkillRuntimeSandboxTests
from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.aio.async_runtime import AsyncAioSkillRuntime
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.deepagents import SkillRuntimeBackend
from skillruntime.local import LocalSkillRuntime
from skillruntime.local.async_runtime import AsyncLocalSkillRuntime
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

CONVERSATION = "deepagents-suite"
LOCAL_ROOT = Path(tempfile.mkdtemp(prefix="skillruntime-deepagents-suite-"))
OPENSANDBOX_ROOT = "/workspace/conversations"
AIO_ROOT = "/home/gem/workspace/conversations"
IMAGE_BIN = "/workspace/.image-bin"
STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class TestLocalBackend(SkillRuntimeSandboxTests):
    """The local runtime, native async (``AsyncLocalSkillRuntime``)."""

    root: ClassVar[str] = f"{LOCAL_ROOT.resolve()}/{CONVERSATION}/suite/"

    @pytest.fixture(scope="class")
    def sandbox(self) -> Iterator[SkillRuntimeBackend]:
        options = {"conversation_id": CONVERSATION, "conversations_root": LOCAL_ROOT}
        async_local = AsyncLocalSkillRuntime(**options)  # type: ignore[arg-type]
        try:
            with LocalSkillRuntime(**options) as runtime:  # type: ignore[arg-type]
                yield SkillRuntimeBackend(runtime, async_runtime=async_local)
        finally:
            asyncio.run(async_local.close())
            shutil.rmtree(LOCAL_ROOT, ignore_errors=True)


class TestOpenSandboxBackend(SkillRuntimeSandboxTests):
    """The OpenSandbox runtime on the double, native async (``AsyncOpenSandboxSkillRuntime``)."""

    root: ClassVar[str] = f"{OPENSANDBOX_ROOT}/{CONVERSATION}/suite/"

    @pytest.fixture(scope="class")
    def opensandbox_options(self, opensandbox_double: OpenSandboxDouble) -> dict[str, Any]:
        # One store for the sync and the async runtime: both attach the conversation's sandbox.
        return {
            "domain": opensandbox_double.domain,
            "api_key": opensandbox_double.api_key,
            "conversation_id": CONVERSATION,
            "conversations_root": OPENSANDBOX_ROOT,
            "conversation_store": InMemoryConversationStore(),
            "base_environment": {"PATH": f"{IMAGE_BIN}:{STANDARD_PATH}"},
        }

    @pytest.fixture(scope="class")
    def sandbox(self, opensandbox_options: dict[str, Any]) -> Iterator[SkillRuntimeBackend]:
        # The suite runs `python`. The runtime's default image (python:3.11) has it; the double
        # runs commands on this host with a container's standard PATH, where only python3 is, so
        # the sandbox gets a `python` link first.
        runtime = OpenSandboxSkillRuntime(**opensandbox_options)
        link = runtime.execute(
            SkillExecutionRequest(
                command=f'mkdir -p {IMAGE_BIN} && ln -sf "$(command -v python3)" {IMAGE_BIN}/python'
            )
        )
        assert link.exit_code == 0, link.stderr
        async_opensandbox = AsyncOpenSandboxSkillRuntime(**opensandbox_options)
        try:
            yield SkillRuntimeBackend(runtime, async_runtime=async_opensandbox)
        finally:
            asyncio.run(async_opensandbox.close())
            with contextlib.suppress(Exception):
                runtime.destroy_conversation_sandbox()
            runtime.close()


class _AioBackend(SkillRuntimeSandboxTests):
    """The AIO runtime on a double, native async (``AsyncAioSkillRuntime``)."""

    root: ClassVar[str] = f"{AIO_ROOT}/{CONVERSATION}/suite/"
    double_fixture: ClassVar[str] = ""

    def aio_options(self, request: pytest.FixtureRequest) -> dict[str, str]:
        double: AioDouble = request.getfixturevalue(self.double_fixture)
        return {
            "base_url": double.url,
            "token": double.token,
            "conversation_id": CONVERSATION,
            "conversations_root": AIO_ROOT,
        }

    @pytest.fixture(scope="class")
    def sandbox(self, request: pytest.FixtureRequest) -> Iterator[SkillRuntimeBackend]:
        options = self.aio_options(request)
        async_aio = AsyncAioSkillRuntime(**options)  # type: ignore[arg-type]
        try:
            with AioSandboxSkillRuntime(**options) as runtime:  # type: ignore[arg-type]
                yield SkillRuntimeBackend(runtime, async_runtime=async_aio)
        finally:
            asyncio.run(async_aio.close())


class TestAioBashBackend(_AioBackend):
    """AIO with the ``/v1/bash`` command API."""

    double_fixture: ClassVar[str] = "aio_bash"


class TestAioShellBackend(_AioBackend):
    """AIO with the older ``/v1/shell`` command API."""

    double_fixture: ClassVar[str] = "aio_shell"
