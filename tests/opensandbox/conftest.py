"""Fixtures of the OpenSandbox suite: one protocol double per session, with execd's linger
scaled down (``SCALED_TAIL_DELAY``); the modules about hang-ups in the linger define their own
double with execd's 1 s."""

from __future__ import annotations

from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY

opensandbox_double = opensandbox_double_fixture(tail_delay=SCALED_TAIL_DELAY)
