"""Commands in a sandbox whose image has no ``setsid`` (the double's image profile hides it).

Without ``setsid`` the wrapper cannot give the command a process group of its own: the command
shares the wrapper's. At the deadline the watchdog sends that group ``TERM`` (the wrapper traps
it): a command that ends on it is reported as usual, with its output. One that outlives the
grace is killed with the whole group, the wrapper included, so no report follows: the watchdog
says it fired before it kills, and the result is still a timeout (``timed_out``, exit code -1,
the output lost), never a
:class:`~skillruntime.opensandbox.command_plans.CommandOutcomeUnknownError`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from skillruntime.opensandbox.command_plans import CommandEvents, CommandOutcomeUnknownError
from skillruntime.opensandbox.wrapper import KILL_GRACE_SECONDS

TIMEOUT = 2.0
LATE = 1.5
"""How long past its deadline (or its deadline and the kill grace) a timed-out command may take
to come back (the kill, the stream's events, a loaded host)."""


@pytest.fixture(scope="module")
def slim_image(opensandbox_double: OpenSandboxDouble) -> Iterator[str]:
    uri = f"slim-no-setsid-{uuid.uuid4().hex[:8]}:1"
    opensandbox_double.set_image_profile(uri, missing_tools=["setsid"])
    yield uri
    opensandbox_double.set_image_profile(uri, missing_tools=[])


@pytest.fixture
def runtime(
    opensandbox_double: OpenSandboxDouble, slim_image: str
) -> Iterator[OpenSandboxSkillRuntime]:
    with OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, image=slim_image
    ) as runtime:
        yield runtime


def _killed_wrapper(*, watchdog_said: bool) -> CommandEvents:
    """The events of a wrapper killed by a signal (execd's ``-1``) before its trailer."""
    events = CommandEvents("n0nce", 1024)
    events.progress.start(TIMEOUT)
    events.on_init(SimpleNamespace(id="exec-1"))
    if watchdog_said:
        assert not events.on_stdout(SimpleNamespace(text="SROSn0nce T"))
    events.on_error(SimpleNamespace(name="CommandExecError", value="-1"))
    return events


def test_a_wrapper_killed_after_its_watchdog_said_so_is_a_timeout() -> None:
    events = _killed_wrapper(watchdog_said=True)
    assert events.known
    result = events.result(error=None, interrupted=False, duration=2.1, timeout_seconds=TIMEOUT)
    assert (result.timed_out, result.exit_code, result.stdout, result.stderr) == (
        True,
        -1,
        "",
        "",
    )


def test_a_wrapper_killed_otherwise_is_still_an_unknown_outcome() -> None:
    events = _killed_wrapper(watchdog_said=False)
    with pytest.raises(CommandOutcomeUnknownError):
        events.result(error=None, interrupted=False, duration=0.1, timeout_seconds=TIMEOUT)


def _token() -> str:
    return str(uuid.uuid4().int % 10**12)


def _probe(token: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=f"ps -eo args | grep -x 'sleep 30.{token}'")


def test_the_image_has_no_setsid(runtime: OpenSandboxSkillRuntime) -> None:
    result = runtime.execute(SkillExecutionRequest(command="setsid true"))
    assert result.exit_code == 127
    assert "setsid: command not found" in result.stderr


def test_a_command_ends_with_its_output_and_exit_code(runtime: OpenSandboxSkillRuntime) -> None:
    result = runtime.execute(
        SkillExecutionRequest(command="printf 'a\\r\\nb'; echo err >&2; exit 3")
    )
    assert (result.exit_code, result.timed_out) == (3, False)
    assert (result.stdout, result.stderr) == ("a\r\nb", "err\n")


@pytest.mark.slow
def test_a_timeout_is_a_timeout_returned_at_the_deadline(
    runtime: OpenSandboxSkillRuntime,
) -> None:
    assert runtime.execute(SkillExecutionRequest(command="true")).ok  # the sandbox is up
    started = time.monotonic()
    result = runtime.execute(SkillExecutionRequest(command="sleep 5", timeout_seconds=TIMEOUT))
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert TIMEOUT <= elapsed < TIMEOUT + LATE


@pytest.mark.slow
def test_a_timeout_kills_the_whole_tree(runtime: OpenSandboxSkillRuntime) -> None:
    token = _token()
    result = runtime.execute(
        SkillExecutionRequest(
            command=f"sleep 30.{token} & sleep 30.{token}; wait", timeout_seconds=TIMEOUT
        )
    )
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert runtime.execute(_probe(token)).exit_code == 1  # no such process left


@pytest.mark.slow
@pytest.mark.parametrize("ignores_term", [False, True])
def test_a_timed_out_command_leaves_no_files_behind(
    runtime: OpenSandboxSkillRuntime, ignores_term: bool
) -> None:
    listing = SkillExecutionRequest(command="ls -A /tmp/.skillruntime-runs-default")
    before = runtime.execute(listing)  # the listing's own output files
    trap = "trap '' TERM; " if ignores_term else ""
    started = time.monotonic()
    result = runtime.execute(
        SkillExecutionRequest(command=f"{trap}echo partial; sleep 30", timeout_seconds=TIMEOUT)
    )
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.exit_code) == (True, -1)
    if ignores_term:  # killed with the wrapper after the grace: the output is lost
        assert result.stdout == ""
        assert TIMEOUT + KILL_GRACE_SECONDS <= elapsed < TIMEOUT + KILL_GRACE_SECONDS + LATE
    else:
        assert result.stdout == "partial\n"
        assert TIMEOUT <= elapsed < TIMEOUT + LATE
    after = runtime.execute(listing)
    assert len(after.stdout.split()) == len(before.stdout.split()) == 2


@pytest.mark.slow
def test_async_a_timeout_is_a_timeout_returned_at_the_deadline(
    opensandbox_double: OpenSandboxDouble, slim_image: str
) -> None:
    async def scenario() -> tuple[bool, int, float]:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, image=slim_image
        ) as runtime:
            assert (await runtime.execute(SkillExecutionRequest(command="true"))).ok
            started = time.monotonic()
            result = await runtime.execute(
                SkillExecutionRequest(command="sleep 5", timeout_seconds=TIMEOUT)
            )
            return result.timed_out, result.exit_code, time.monotonic() - started

    timed_out, exit_code, elapsed = asyncio.run(scenario())
    assert (timed_out, exit_code) == (True, -1)
    assert TIMEOUT <= elapsed < TIMEOUT + LATE
