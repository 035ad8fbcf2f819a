"""Fixtures for the AIO double's own tests: one shared double per module plus a client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doubles.aio import AioDouble
from doubles.aio.rawclient import RawClient


@pytest.fixture(scope="module")
def aio() -> Iterator[AioDouble]:
    with AioDouble() as double:
        yield double


@pytest.fixture
def client(aio: AioDouble) -> Iterator[RawClient]:
    c = RawClient(aio)
    yield c
    c.close()
