"""langchain-tests' ``SandboxIntegrationTests`` (deepagents' conformance suite) against
:class:`SkillRuntimeBackend` on the Docker runtime, on the real Docker Engine.

The same suite, with the same replaced tests (``deepagents_peer.OVERRIDDEN``), as for the other
runtimes in ``tests/deepagents/test_peer_suite.py``. The backend works inside a conversation
workspace of a container (the image with python3: the suite and deepagents' own
``BaseSandbox``, the oracle of the replaced tests, run ``python``/``python3`` there). Async
methods go through ``AsyncDockerSkillRuntime`` on the same conversation and the same
conversation store, so both attach the one container.

The conversation is this process's own (each pytest-xdist worker that runs part of the class
builds the class fixture itself); the fixture builds the async runtime once, outside any event
loop, and at the end destroys the conversation (record, container and volume).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from deepagents_peer import SkillRuntimeSandboxTests
from docker_engine import PYTHON_IMAGE_VARIABLE, TEST_LABEL, Engine
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.deepagents import SkillRuntimeBackend
from skillruntime.docker import AsyncDockerSkillRuntime, DockerSkillRuntime

CONVERSATION = f"deepagents-suite-{uuid.uuid4().hex[:8]}"
DOCKER_ROOT = "/workspace/conversations"


class TestDockerBackend(SkillRuntimeSandboxTests):
    """The Docker runtime on the real engine; async through ``AsyncDockerSkillRuntime``."""

    root: ClassVar[str] = f"{DOCKER_ROOT}/{CONVERSATION}/suite/"

    @pytest.fixture(scope="class")
    def sandbox(self, docker_engine: Engine) -> Iterator[SkillRuntimeBackend]:
        options: dict[str, Any] = {
            "docker_host": docker_engine.host,
            "image": os.environ[PYTHON_IMAGE_VARIABLE],
            "conversation_id": CONVERSATION,
            "conversations_root": DOCKER_ROOT,
            "conversation_store": InMemoryConversationStore(),
            "labels": {TEST_LABEL: "deepagents-peer"},
        }
        runtime = DockerSkillRuntime(**options)
        async_docker = AsyncDockerSkillRuntime(**options)
        try:
            yield SkillRuntimeBackend(runtime, async_runtime=async_docker)
        finally:
            asyncio.run(async_docker.close())
            with contextlib.suppress(Exception):
                runtime.destroy_conversation()
            runtime.close()
