"""Where a command's deadline is counted from: execd's ``init`` event, not the request.

The wrapper's watchdog starts its clock in the sandbox, after execd started the command; the
client cannot know when that was, only that it was before the ``init`` event reached it. A
deadline counted from the request would end early by however long the request took (a loaded
host, a slow network), and an exclusive lease would be given up while the command still runs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from skillruntime.opensandbox import command_plans
from skillruntime.opensandbox.command_plans import DEADLINE_MARGIN_SECONDS, CommandEvents
from skillruntime.opensandbox.wrapper import KILL_GRACE_SECONDS

MARGIN = KILL_GRACE_SECONDS + DEADLINE_MARGIN_SECONDS
"""Past the timeout, the watchdog's grace between its TERM and its KILL, then the kill itself."""


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(command_plans.time, "monotonic", fake)
    return fake


def test_the_deadline_is_counted_from_the_init_event(clock: _Clock) -> None:
    events = CommandEvents("n0nce", 1024)
    events.progress.start(2.0)
    assert events.progress.ends_by == pytest.approx(1002.0 + MARGIN)
    clock.now += 3.25  # the request took 3.25 s to reach execd
    events.on_init(SimpleNamespace(id="exec-1"))
    assert events.progress.execution_id == "exec-1"
    assert events.progress.ends_by == pytest.approx(1005.25 + MARGIN)


def test_an_init_event_never_moves_the_deadline_earlier(clock: _Clock) -> None:
    events = CommandEvents("n0nce", 1024)
    events.progress.start(5.0)
    before = events.progress.ends_by
    clock.now -= 1.0  # a clock read earlier than the start (no later time than the request)
    events.on_init(SimpleNamespace(id=None))
    assert events.progress.execution_id is None
    assert events.progress.ends_by == before
