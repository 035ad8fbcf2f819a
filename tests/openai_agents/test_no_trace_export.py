"""No test exports a trace: the Agents SDK's tracing is off in every test process.

Its exporter would otherwise send spans of scripted runs to the real service with whatever key a
test sets, and report a failed export at interpreter exit (``[non-fatal] Tracing: ...``).
"""

from __future__ import annotations

from agents import trace
from agents.tracing import get_trace_provider


def test_the_sdk_trace_provider_is_disabled() -> None:
    with trace("a test run") as current:
        # A disabled provider hands out no-op traces, which nothing exports.
        assert type(current).__name__ == "NoOpTrace"
    assert get_trace_provider()._disabled is True
