"""Pytest fixture factory for the OpenSandbox double.

A ``conftest.py`` imports it and binds the fixture, for example::

    from doubles.opensandbox.fixtures import opensandbox_double_fixture

    opensandbox_double = opensandbox_double_fixture()           # session-scoped double

The fixture yields a started :class:`~doubles.opensandbox.OpenSandboxDouble`; one server
process serves the whole session (any number of client processes may use its ``domain``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from doubles.opensandbox.harness import OpenSandboxDouble


def opensandbox_double_fixture(scope: str = "session", **options: Any) -> Callable[..., Any]:
    """Build a fixture yielding a running double; ``options`` go to ``OpenSandboxDouble``."""

    def opensandbox_double() -> Iterator[OpenSandboxDouble]:
        with OpenSandboxDouble(**options) as double:
            yield double

    fixture: Callable[..., Any] = pytest.fixture(scope=scope)(opensandbox_double)  # type: ignore[call-overload]
    return fixture
