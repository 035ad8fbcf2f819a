"""Suite-wide rules that hold for every test, in every pytest-xdist worker.

- No test exports traces: the OpenAI Agents SDK's trace exporter is switched off before any test
  imports the SDK (its background exporter would otherwise try to reach the real service with
  whatever key a test sets, and report a failed export at interpreter exit).
- The real OpenViking server is started once per test process that needs it: under xdist, once
  per worker (at most ``TEST_WORKERS`` servers, each a few seconds to start). Grouping its tests
  on one worker with ``xdist_group`` does not work with pytest 9.2 and pytest-xdist 3.8 (xdist
  renames ``item._nodeid``, which pytest 9.2 no longer reads), so the suite does not rely on it.
- ``make test-quick`` and the lowest-versions run leave out the tests marked ``slow``: besides
  those marked where they are written, every test of the modules in :data:`SLOW_MODULES`. They
  are end-to-end costs (real servers, racing processes, process restarts, fault workloads, the
  peer suites, symlink-swap races, the benchmarks' quick mode); what each distribution does is
  also tested by its fast modules, so the quick set covers every distribution.
- The Docker tests' engine, and the check that they leave no container or volume behind, are
  the plugin :mod:`docker_engine`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

# The Docker Engine of the Docker tests and the leak check at the end of the session.
pytest_plugins = ["docker_engine"]

SLOW_MODULES = frozenset(
    {
        "agent_turn/test_turn_viking_real.py",
        "benchmarks/test_bench_quick.py",
        "conversations/test_async_exclusive_conversations.py",
        "conversations/test_exclusive_conversations.py",
        "deepagents/test_peer_suite.py",
        "docker/test_docker_deepagents_peer.py",
        "faults/test_opensandbox_faults.py",
        "faults/test_store_faults.py",
        "mcp/test_mcp_backends.py",
        "openai_agents/test_resume_process.py",
        "opensandbox/test_opensandbox_hangups.py",
        "opensandbox/test_opensandbox_multinode.py",
        "security/test_local_symlink_race.py",
        "viking_cli/test_viking_cli_real.py",
        "viking_real/test_viking_real_store.py",
        "viking_tools/test_viking_tools_real.py",
    }
)
"""Modules (relative to ``tests/``) whose every test is marked ``slow``."""
_TESTS = Path(__file__).resolve().parent


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark the tests of :data:`SLOW_MODULES` ``slow`` (as each item is collected, before any
    ``-m`` selection)."""
    if item.path.relative_to(_TESTS).as_posix() in SLOW_MODULES:
        item.add_marker(pytest.mark.slow)
