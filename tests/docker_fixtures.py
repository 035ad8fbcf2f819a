"""What the Docker suites share until the suite-wide conftest lands: the engine, the test image,
the deployment label every test container and volume carries, and a clean-up by that label.

The engine is the one ``DOCKER_HOST`` names (a private daemon in CI); the image is
``SKILLRUNTIME_DOCKER_TEST_IMAGE`` (default ``srt-test:1``: busybox, bash, users root and
``user`` uid 1000), built locally, never pulled.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from skillruntime.core.conversations import InMemoryConversationStore

IMAGE = os.environ.get("SKILLRUNTIME_DOCKER_TEST_IMAGE", "srt-test:1")
TEST_LABEL = "skillruntime-test-suite"
ROOT = "/workspace/conversations"


def engine_client() -> Any:
    """A ``docker`` SDK client of the test engine (``DOCKER_HOST``)."""
    return docker.from_env(version="auto")


def suite_labels(run: str) -> dict[str, str]:
    """The deployment labels of one test's runtimes."""
    return {TEST_LABEL: run}


def remove_labelled(run: str | None = None) -> tuple[int, int]:
    """Remove every container and volume carrying the suite's label (of ``run`` only, when
    given); returns how many containers and volumes were removed."""
    client = engine_client()
    selector = f"{TEST_LABEL}={run}" if run else TEST_LABEL
    try:
        containers = client.containers.list(all=True, filters={"label": selector})
        for container in containers:
            container.remove(force=True)
        volumes = client.volumes.list(filters={"label": selector})
        for volume in volumes:
            volume.remove(force=True)
        return len(containers), len(volumes)
    finally:
        client.close()


def labelled(run: str) -> tuple[list[str], list[str]]:
    """Ids of the containers and names of the volumes of ``run`` that still exist."""
    client = engine_client()
    try:
        selector = f"{TEST_LABEL}={run}"
        containers = [c.id for c in client.containers.list(all=True, filters={"label": selector})]
        volumes = [v.name for v in client.volumes.list(filters={"label": selector})]
        return containers, volumes
    finally:
        client.close()


@pytest.fixture
def docker_run() -> Iterator[str]:
    """A label value unique to one test; what the test left behind is removed afterwards."""
    run = f"t-{uuid.uuid4().hex[:10]}"
    yield run
    remove_labelled(run)


@pytest.fixture
def docker_store() -> InMemoryConversationStore:
    """A conversation store of one test."""
    return InMemoryConversationStore()
