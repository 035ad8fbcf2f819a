"""Suite-wide rules that hold for every test, in every pytest-xdist worker.

- No test exports traces: the OpenAI Agents SDK's trace exporter is switched off before any test
  imports the SDK (its background exporter would otherwise try to reach the real service with
  whatever key a test sets, and report a failed export at interpreter exit).
- The real OpenViking server costs a few hundred MB and several seconds to start, so every test
  that uses it runs in one xdist group (one worker, one server); see the Makefile's
  ``--dist loadgroup``.
"""

from __future__ import annotations

import os

import pytest

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

_OPENVIKING_GROUP = pytest.mark.xdist_group("openviking")
_OPENVIKING_MODULES = ("test_turn_viking_real.py",)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put every real-OpenViking test in the ``openviking`` xdist group."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "openviking_server" in fixtures or item.path.name in _OPENVIKING_MODULES:
            item.add_marker(_OPENVIKING_GROUP)
