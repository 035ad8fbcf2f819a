"""The checks of the suite's Docker Engine tooling use the same session engine as the Docker
tests (``tests/docker/conftest.py``)."""

from __future__ import annotations

import pytest

from docker_engine import Engine, EngineUnavailableError, ensure_engine


@pytest.fixture(scope="session")
def docker_engine() -> Engine:
    """The real Docker Engine of the session and its test images."""
    try:
        return ensure_engine()
    except EngineUnavailableError as error:
        reason = str(error)
    pytest.fail(reason, pytrace=False)
