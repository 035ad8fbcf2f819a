"""The driver kit on the Docker driver against the real engine: every conversation rule of
core's lifecycle, with containers and labels (docs/custom-runtime.md, "Writing a sandbox
driver")."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

from docker_fixtures import IMAGE, TEST_LABEL, engine_client
from skillruntime.core.conversations.sandboxes import (
    ROLE_CONVERSATION,
    ROLE_PRIVATE,
    TAG_CONVERSATION_KEY,
    TAG_ROLE,
    SandboxDriver,
)
from skillruntime.core.testing import DriverConformance
from skillruntime.docker.driver import DockerDriver
from skillruntime.docker.engine import DockerEngine
from skillruntime.docker.runtime import volume_name
from skillruntime.docker.security import ContainerSecurity

_RUN = f"driver-kit-{uuid.uuid4().hex[:8]}"


class TestDockerDriver(DriverConformance):
    runtime_tag = "docker"
    deployment_tags: ClassVar[Mapping[str, str]] = {TEST_LABEL: _RUN}

    def make_driver(self, tags: Mapping[str, str], *, private: bool = False) -> SandboxDriver[Any]:
        driver = DockerDriver(
            DockerEngine(None),
            image=IMAGE,
            security=ContainerSecurity(),
            # Labels are fixed at creation: a conversation's container is born recorded.
            labels={**tags, TAG_ROLE: ROLE_PRIVATE if private else ROLE_CONVERSATION},
            environment={},
            volume=None
            if private
            else (volume_name(tags[TAG_CONVERSATION_KEY]), "/workspace/conversations"),
        )
        typed: SandboxDriver[Any] = driver
        return typed

    def vanish(self, driver: SandboxDriver[Any], sandbox_id: str) -> None:
        # Removed by someone else, through the engine, not the driver.
        engine_client().api.remove_container(sandbox_id, force=True)

    def cleanup(self, driver: SandboxDriver[Any]) -> None:
        assert isinstance(driver, DockerDriver)
        driver.remove_volume()
        driver.engine.close()
