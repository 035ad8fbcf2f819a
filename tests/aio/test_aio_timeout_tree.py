"""A timed-out command's whole tree is stopped, on both command APIs, sync and async: also a
child that left the process group with ``setsid``; ``SIGTERM`` first, ``SIGKILL`` after a grace
(as the local runtime does); and the call returns at the deadline (plus that grace at most).

The double reproduces the service: on ``/v1/bash`` its ``hard_timeout`` sends ``SIGKILL`` only,
on ``/v1/shell`` the command's own process group is all a ``setsid`` wrapper reaches. What is
checked here is the runtime's own doing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from doubles._polling import wait_until
from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.aio.script import KILL_GRACE_SECONDS
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE

pytestmark = pytest.mark.slow

ROOT = "/home/gem/workspace/conversations"
TIMEOUT = 2.0
MARGIN = 6.0
"""Seconds past the deadline and the kill grace a loaded two-core machine may need."""

# The repro: a child that leaves the group, and a foreground sleep past the deadline.
_REPRO = "setsid sleep 3341 & echo $! >> {pids}; sleep 3342"

# A command and a setsid child that both trap SIGTERM and write it down before exiting. Each
# trap first ignores further TERMs: the runtime may signal a process twice (its group, then the
# marked processes), and a second TERM arriving while the first trap runs would run it again.
_TRAPS = (
    'setsid bash -c \'trap "trap \\"\\" TERM; echo child >> {log}; exit 1" TERM; '
    "sleep 3341 & echo $! >> {pids}; wait' & "
    "trap 'trap \"\" TERM; echo parent >> {log}; exit 1' TERM; sleep 3342 & wait"
)


@pytest.fixture(scope="module", params=["bash", "shell"])
def double(request: pytest.FixtureRequest) -> Iterator[AioDouble]:
    """A current image (``/v1/bash``) and an older one (``/v1/shell`` only)."""
    with AioDouble(bash_api=request.param == "bash") as aio:
        yield aio


def _paths() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"/tmp/tree-{tag}.pids", f"/tmp/tree-{tag}.log"


def _left_running(double: AioDouble, pids: str) -> list[int]:
    """The recorded ``sleep 3341`` processes still running (a short wait for slow reaping)."""
    found = [int(pid) for pid in double.host_path(pids).read_text().split()]
    assert found
    wait_until(lambda: all(double.process_gone(pid) for pid in found), timeout=5)
    return [pid for pid in found if not double.process_gone(pid)]


def _check(result: SkillExecutionResult, elapsed: float) -> None:
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert elapsed < TIMEOUT + KILL_GRACE_SECONDS + MARGIN, elapsed


def _terms(double: AioDouble, log: str) -> list[str]:
    path = double.host_path(log)
    return sorted(path.read_text().split()) if path.exists() else []


def _runtime(double: AioDouble) -> AioSandboxSkillRuntime:
    return AioSandboxSkillRuntime(
        base_url=double.url, token=double.token, conversation_id="tree", conversations_root=ROOT
    )


def _async_runtime(double: AioDouble) -> AsyncAioSkillRuntime:
    return AsyncAioSkillRuntime(
        base_url=double.url, token=double.token, conversation_id="tree", conversations_root=ROOT
    )


def _request(template: str, pids: str, log: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(
        command=template.format(pids=pids, log=log), timeout_seconds=TIMEOUT
    )


def test_sync_timeout_kills_a_setsid_child(double: AioDouble) -> None:
    pids, log = _paths()
    with _runtime(double) as rt:
        start = time.monotonic()
        result = rt.execute(_request(_REPRO, pids, log))
        _check(result, time.monotonic() - start)
        assert _left_running(double, pids) == []
        assert rt.execute(SkillExecutionRequest(command="echo next")).stdout == "next\n"


def test_async_timeout_kills_a_setsid_child(double: AioDouble) -> None:
    pids, log = _paths()

    async def main() -> None:
        async with _async_runtime(double) as rt:
            start = time.monotonic()
            result = await rt.execute(_request(_REPRO, pids, log))
            _check(result, time.monotonic() - start)
            assert _left_running(double, pids) == []
            after = await rt.execute(SkillExecutionRequest(command="echo next"))
            assert after.stdout == "next\n"

    asyncio.run(main())


def test_sync_timeout_sends_term_before_kill(double: AioDouble) -> None:
    pids, log = _paths()
    with _runtime(double) as rt:
        start = time.monotonic()
        result = rt.execute(_request(_TRAPS, pids, log))
        _check(result, time.monotonic() - start)
        assert _terms(double, log) == ["child", "parent"]
        assert _left_running(double, pids) == []


def test_async_timeout_sends_term_before_kill(double: AioDouble) -> None:
    pids, log = _paths()

    async def main() -> None:
        async with _async_runtime(double) as rt:
            start = time.monotonic()
            result = await rt.execute(_request(_TRAPS, pids, log))
            _check(result, time.monotonic() - start)
            assert _terms(double, log) == ["child", "parent"]
            assert _left_running(double, pids) == []

    asyncio.run(main())


def test_a_command_ignoring_term_is_killed_after_the_grace(double: AioDouble) -> None:
    """A tree that ignores SIGTERM gets SIGKILL once the grace is over; the call returns then."""
    pids, _ = _paths()
    command = f"trap '' TERM; setsid sleep 3341 & echo $! >> {pids}; sleep 3342 & wait"
    with _runtime(double) as rt:
        start = time.monotonic()
        result = rt.execute(SkillExecutionRequest(command=command, timeout_seconds=TIMEOUT))
        elapsed = time.monotonic() - start
        _check(result, elapsed)
        assert elapsed >= TIMEOUT + KILL_GRACE_SECONDS * 0.9, elapsed
        assert _left_running(double, pids) == []


def test_the_command_holds_the_callers_marker_and_the_wrapper_does_not(
    double: AioDouble,
) -> None:
    """The caller's token (the thread bridge sweeps for it) reaches the command; on
    ``/v1/shell`` it is put on the command, never in the environment file the wrapper sources
    (its watchdog's helpers would hold it and look like the command's processes)."""
    token = uuid.uuid4().hex
    request = SkillExecutionRequest(
        command=f'echo "${CANCEL_MARKER_VARIABLE}" "$OTHER"',
        environment={CANCEL_MARKER_VARIABLE: token, "OTHER": "x"},
    )
    double.reset_stats()
    with _runtime(double) as rt:
        assert rt.execute(request).stdout == f"{token} x\n"
    written = [
        str(entry["body"].get("content", ""))
        for entry in double.requests()
        if entry["path"] == "/v1/file/write" and isinstance(entry["body"], dict)
    ]
    assert all(token not in content for content in written)
    assert written or rt.command_api == "bash"
