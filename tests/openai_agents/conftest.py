"""Fixtures of the Agents SDK suite: the doubles, shared by the module's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doubles.aio import AioDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY

opensandbox_double = opensandbox_double_fixture(scope="module", tail_delay=SCALED_TAIL_DELAY)


@pytest.fixture(scope="module")
def aio_double() -> Iterator[AioDouble]:
    with AioDouble() as double:
        yield double
