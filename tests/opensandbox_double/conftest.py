"""Fixtures of the OpenSandbox double's own suite: one double per session, raw HTTP helpers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.rawclient import RawSandbox, create_raw

opensandbox_double = opensandbox_double_fixture()


@pytest.fixture
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


@pytest.fixture
def sandbox(opensandbox_double: OpenSandboxDouble, http: requests.Session) -> Iterator[RawSandbox]:
    """A fresh sandbox, deleted afterwards (a 404 on delete is fine: the test may kill it)."""
    raw = create_raw(opensandbox_double, http)
    yield raw
    raw.lifecycle("DELETE", f"/sandboxes/{raw.id}")
    opensandbox_double.clear_faults()
