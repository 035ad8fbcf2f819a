"""Fixtures of the AIO runtime suite: AIO Sandbox doubles (with and without /v1/bash)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doubles.aio import AioDouble


@pytest.fixture(scope="module")
def aio_bash() -> Iterator[AioDouble]:
    """A double of a current image (``/v1/bash`` present), bearer auth."""
    with AioDouble(bash_api=True) as double:
        yield double


@pytest.fixture(scope="module")
def aio_shell() -> Iterator[AioDouble]:
    """A double of an older image: ``/v1/bash/*`` answers 404, commands go through ``/v1/shell``."""
    with AioDouble(bash_api=False) as double:
        yield double
