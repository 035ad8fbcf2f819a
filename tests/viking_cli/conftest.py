"""Fixtures of the ``skillruntime viking`` CLI tests: the real ``openviking`` server.

One server is shared by every suite of the test process.

The server runs from its own virtual environment (created on first use, see
``viking_real.openviking_harness``), on a free loopback port, with a temporary workspace; it is
stopped when the session ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from viking_real.openviking_harness import OpenVikingServer, shared_server


@pytest.fixture(scope="session")
def openviking_server() -> Iterator[OpenVikingServer]:
    """The running real server (shared by every suite of this process)."""
    yield from shared_server()
