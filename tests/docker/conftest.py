"""The Docker tests run on a real Docker Engine: this session fixture makes sure there is one
and that the test images are on it, before any Docker test runs.

``docker_engine`` (session-scoped, used by every test of this folder) is
:func:`docker_engine.ensure_engine`: ``DOCKER_HOST`` when a daemon answers there, else the
suite's private daemon (``scripts/docker-engine.sh start``, its images built by
``scripts/docker-engine.sh image``), once for all pytest-xdist workers under a file lock. It
exports ``DOCKER_HOST``, ``SKILLRUNTIME_DOCKER_TEST_IMAGE`` (busybox and bash, a non-root user
``skill``) and ``SKILLRUNTIME_DOCKER_TEST_PYTHON_IMAGE`` (the same with python3), which the
runtime's fixtures read. The image names are already set when this file is imported (a module
reading them at import time gets them too); ``DOCKER_HOST`` is set by the fixture. When no
engine can be had, every Docker test fails with the one-line reason (never skipped). The leak
check at the end of the session is in :mod:`docker_engine` (a plugin of the suite's
``conftest.py``).
"""

from __future__ import annotations

import os

import pytest

from docker_engine import (
    DEFAULT_IMAGE,
    DEFAULT_PYTHON_IMAGE,
    IMAGE_VARIABLE,
    PYTHON_IMAGE_VARIABLE,
    Engine,
    EngineUnavailableError,
    ensure_engine,
)

# The image names are known before the engine is: modules that read them when imported get them.
os.environ.setdefault(IMAGE_VARIABLE, DEFAULT_IMAGE)
os.environ.setdefault(PYTHON_IMAGE_VARIABLE, DEFAULT_PYTHON_IMAGE)


@pytest.fixture(scope="session", autouse=True)
def docker_engine() -> Engine:
    """The real Docker Engine of the session and its test images (exported to the environment)."""
    try:
        return ensure_engine()
    except EngineUnavailableError as error:
        reason = str(error)
    pytest.fail(reason, pytrace=False)
