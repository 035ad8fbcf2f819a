"""Fixtures of the fault-injection suite: one OpenSandbox double per session."""

from __future__ import annotations

from doubles.opensandbox.fixtures import opensandbox_double_fixture

opensandbox_double = opensandbox_double_fixture()
