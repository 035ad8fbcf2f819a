"""A timed-out command is stopped with its whole tree, also what left its process group.

Every process of a command carries the run's marker (``SKILLRUNTIME_CANCEL_MARK=<token>``) in its
environment, so at the deadline the wrapper's watchdog sends ``TERM`` to the command's process
group *and* to every marked process, then ``KILL`` to both: a child that left the group
(``setsid``, or a job of a shell with job control on, in an image without ``setsid``) gets the
``TERM`` first and does not survive. The same holds on the sync and the async faces, with and
without ``setsid`` in the image (the double hides it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from skillruntime.opensandbox.command_plans import command_options, command_script, marker_token
from skillruntime.opensandbox.options import DEFAULT_IMAGE
from skillruntime.opensandbox.wrapper import KILL_GRACE_SECONDS

pytestmark = pytest.mark.slow

TIMEOUT = 2.0
MARGIN = 6.0
"""How long past its deadline and grace a call may take on a loaded 2-core host."""


@pytest.fixture(scope="module")
def slim_image(opensandbox_double: OpenSandboxDouble) -> Iterator[str]:
    uri = f"slim-no-setsid-{uuid.uuid4().hex[:8]}:1"
    opensandbox_double.set_image_profile(uri, missing_tools=["setsid"])
    yield uri
    opensandbox_double.set_image_profile(uri, missing_tools=[])


@dataclass(frozen=True)
class Image:
    """The runtime's image, and whether it has ``setsid``."""

    uri: str
    setsid: bool


@pytest.fixture(params=["default", "no-setsid"])
def image(request: pytest.FixtureRequest, slim_image: str) -> Image:
    """The default image, or one without ``setsid``."""
    if request.param == "default":
        return Image(DEFAULT_IMAGE, setsid=True)
    return Image(slim_image, setsid=False)


def _token() -> str:
    return str(uuid.uuid4().int % 10**9)


def _detached(image: Image, command: str) -> str:
    """``command`` started in the background out of the caller's process group: with
    ``setsid`` where the image has it, else as a job of a shell with job control on."""
    if not image.setsid:
        return f"set -m; {command} & set +m; "
    return f"setsid {command} & "


def _escape(image: Image, token: str) -> str:
    """``setsid sleep 3341 & sleep 3342``: the child left the command's process group."""
    return f"{_detached(image, f'sleep 3341.{token}')}sleep 3342.{token}"


def _term_seen(image: Image, token: str, path: str) -> str:
    """A child out of the group that writes ``path`` on ``TERM``; the command's shell takes a
    moment to end on its own ``TERM``."""
    child = f"sh -c 'trap \"echo seen > {path}; exit 0\" TERM; sleep 3341.{token} & wait'"
    return f"{_detached(image, child)}trap 'sleep 0.5; exit 3' TERM; sleep 3342.{token} & wait"


def _left(run: SkillExecutionResult) -> bool:
    return run.exit_code == 0


def _probe(token: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=f"ps -eo args | grep -x 'sleep 334[12].{token}'")


def _check(result: SkillExecutionResult, elapsed: float) -> None:
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert TIMEOUT <= elapsed < TIMEOUT + KILL_GRACE_SECONDS + MARGIN


def _gone(runtime: OpenSandboxSkillRuntime, token: str) -> bool:
    """No ``sleep 3341``/``sleep 3342`` of this run is left (a killed one may take a moment to
    be reaped: looked at for a few seconds)."""
    for _ in range(10):
        if not _left(runtime.execute(_probe(token))):
            return True
        time.sleep(0.3)
    return False


def test_a_child_that_left_the_group_dies_with_a_timed_out_command(
    opensandbox_double: OpenSandboxDouble, image: Image
) -> None:
    token = _token()
    with OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain,
        api_key=opensandbox_double.api_key,
        image=image.uri,
    ) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok  # the sandbox is up
        started = time.monotonic()
        result = runtime.execute(
            SkillExecutionRequest(command=_escape(image, token), timeout_seconds=TIMEOUT)
        )
        _check(result, time.monotonic() - started)
        assert _gone(runtime, token)


def test_a_child_that_left_the_group_gets_term_before_kill(
    opensandbox_double: OpenSandboxDouble, image: Image
) -> None:
    token = _token()
    path = f"/tmp/term-seen-{token}"
    with OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain,
        api_key=opensandbox_double.api_key,
        image=image.uri,
    ) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok
        started = time.monotonic()
        result = runtime.execute(
            SkillExecutionRequest(command=_term_seen(image, token, path), timeout_seconds=TIMEOUT)
        )
        _check(result, time.monotonic() - started)
        assert _gone(runtime, token)
        seen = runtime.execute(SkillExecutionRequest(command=f"cat {path}"))
        assert seen.stdout == "seen\n"


def test_async_a_child_that_left_the_group_dies_with_a_timed_out_command(
    opensandbox_double: OpenSandboxDouble, image: Image
) -> None:
    token = _token()
    path = f"/tmp/term-seen-{token}"

    async def scenario() -> tuple[SkillExecutionResult, float, SkillExecutionResult, bool, str]:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            image=image.uri,
        ) as runtime:
            assert (await runtime.execute(SkillExecutionRequest(command="true"))).ok
            started = time.monotonic()
            result = await runtime.execute(
                SkillExecutionRequest(command=_escape(image, token), timeout_seconds=TIMEOUT)
            )
            elapsed = time.monotonic() - started
            second = await runtime.execute(
                SkillExecutionRequest(
                    command=_term_seen(image, token, path), timeout_seconds=TIMEOUT
                )
            )
            gone = False
            for _ in range(10):
                if not _left(await runtime.execute(_probe(token))):
                    gone = True
                    break
                await asyncio.sleep(0.3)
            seen = await runtime.execute(SkillExecutionRequest(command=f"cat {path}"))
            return result, elapsed, second, gone, seen.stdout

    result, elapsed, second, gone, seen = asyncio.run(scenario())
    _check(result, elapsed)
    assert (second.timed_out, second.exit_code) == (True, -1)
    assert gone
    assert seen == "seen\n"


def test_the_marker_is_the_caller_s_and_only_the_command_holds_it() -> None:
    environment = {CANCEL_MARKER_VARIABLE: "abc123", "OTHER": "1"}
    opts = command_options(
        uid=None, gid=None, working_directory="/", environment=environment, timeout_seconds=1.0
    )
    assert opts.envs == {"OTHER": "1"}  # not in the wrapper's own environment
    script = command_script(
        "true",
        uid=None,
        nonce="n0",
        max_output_bytes=100,
        timeout_seconds=1.0,
        environment=environment,
    )
    assert f"{CANCEL_MARKER_VARIABLE}=abc123" in script
    assert marker_token({CANCEL_MARKER_VARIABLE: "not a token"}).isalnum()
    assert marker_token({}) != marker_token({})
