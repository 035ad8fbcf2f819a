"""A timed-out command gets ``TERM`` first, then ``KILL``, as on the local runtime.

At the deadline the wrapper's watchdog sends the command's whole process group ``TERM``; what
is left of it once the command's shell ended, or after the grace
(:data:`~skillruntime.opensandbox.wrapper.KILL_GRACE_SECONDS`, the local runtime's default),
gets ``KILL``. So a command may clean up and say so, and the result keeps what it printed. The
same holds in an image without ``setsid`` (the double hides it), where the command shares the
wrapper's group.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from skillruntime.opensandbox.wrapper import KILL_GRACE_SECONDS

pytestmark = pytest.mark.slow

TIMEOUT = 2.0
LATE = 1.5
"""How long past its deadline (and grace) a command may take to come back on a loaded host."""
GOODBYE = "trap 'echo got TERM >&2; exit 3' TERM; echo started; sleep 30 & wait"
"""Says goodbye on ``TERM``: only a ``TERM`` before the ``KILL`` lets it."""


@pytest.fixture(scope="module")
def slim_image(opensandbox_double: OpenSandboxDouble) -> Iterator[str]:
    uri = f"slim-no-setsid-{uuid.uuid4().hex[:8]}:1"
    opensandbox_double.set_image_profile(uri, missing_tools=["setsid"])
    yield uri
    opensandbox_double.set_image_profile(uri, missing_tools=[])


@pytest.fixture(params=["default", "no-setsid"])
def runtime(
    request: pytest.FixtureRequest, opensandbox_double: OpenSandboxDouble, slim_image: str
) -> Iterator[OpenSandboxSkillRuntime]:
    image = {} if request.param == "default" else {"image": slim_image}
    with OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, **image
    ) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok  # the sandbox is up
        yield runtime


def _token() -> str:
    return str(uuid.uuid4().int % 10**12)


def _gone(runtime: OpenSandboxSkillRuntime, token: str) -> bool:
    probe = SkillExecutionRequest(command=f"ps -eo args | grep -x 'sleep 30.{token}'")
    return runtime.execute(probe).exit_code == 1


def test_a_timed_out_command_gets_term_first_and_its_output_is_kept(
    runtime: OpenSandboxSkillRuntime,
) -> None:
    started = time.monotonic()
    result = runtime.execute(SkillExecutionRequest(command=GOODBYE, timeout_seconds=TIMEOUT))
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert (result.stdout, result.stderr) == ("started\n", "got TERM\n")
    assert TIMEOUT <= elapsed < TIMEOUT + LATE  # it ended on the TERM: no grace waited


def test_a_command_ignoring_term_is_killed_after_the_grace(
    runtime: OpenSandboxSkillRuntime,
) -> None:
    token = _token()
    started = time.monotonic()
    result = runtime.execute(
        SkillExecutionRequest(
            command=f"trap '' TERM; sleep 30.{token} & sleep 30.{token}; echo survived",
            timeout_seconds=TIMEOUT,
        )
    )
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert "survived" not in result.stdout
    assert TIMEOUT + KILL_GRACE_SECONDS <= elapsed < TIMEOUT + KILL_GRACE_SECONDS + LATE
    assert _gone(runtime, token)


def test_what_ignores_term_dies_once_the_command_s_shell_ended(
    runtime: OpenSandboxSkillRuntime,
) -> None:
    token = _token()
    started = time.monotonic()
    result = runtime.execute(
        SkillExecutionRequest(
            command=f"echo started; (trap '' TERM; exec sleep 30.{token}) & sleep 31",
            timeout_seconds=TIMEOUT,
        )
    )
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.exit_code, result.stdout) == (True, -1, "started\n")
    assert TIMEOUT <= elapsed < TIMEOUT + LATE  # not the grace
    assert _gone(runtime, token)


def test_async_a_timed_out_command_gets_term_first(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    async def scenario() -> tuple[bool, int, str, str]:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        ) as runtime:
            result = await runtime.execute(
                SkillExecutionRequest(command=GOODBYE, timeout_seconds=TIMEOUT)
            )
            return result.timed_out, result.exit_code, result.stdout, result.stderr

    assert asyncio.run(scenario()) == (True, -1, "started\n", "got TERM\n")
