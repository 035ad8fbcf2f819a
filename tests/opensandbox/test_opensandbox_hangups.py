"""Commands that end early leave the commands running beside them alone.

execd keeps a command stream open about a second after its final event; a client that hangs up
in that second makes execd take a SIGPIPE, which it relays to every command then running in the
sandbox (the double does the same and counts ``grace_hangups``). The runtimes return a command's
result as soon as its report arrived, but read the stream to its end off the caller's path, so
nothing is hung up on and no neighbour is killed. A wrapper that dies without its report is a
typed error raised once the command's deadline passed (its watchdog has ended it by then).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from doubles._polling import wait_until
from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from skillruntime.opensandbox.commands import CommandOutcomeUnknownError

opensandbox_double = opensandbox_double_fixture(scope="module")
"""A double of this module's own, with execd's 1 s linger (the suite's is scaled down)."""

LONG_COMMANDS = 3
SHORT_COMMANDS = 6


def _long(token: str, index: int, seconds: float = 3.0) -> SkillExecutionRequest:
    return SkillExecutionRequest(
        command=(
            f"echo started-{index}; touch /tmp/{token}-{index}; sleep {seconds:g}; "
            f"echo done-{index}"
        ),
        timeout_seconds=30.0,
    )


def _all_started(double: OpenSandboxDouble, sandbox_id: str, token: str) -> bool:
    tmp = double.workspace_of(sandbox_id).parent / "tmp"
    return all((tmp / f"{token}-{index}").exists() for index in range(LONG_COMMANDS))


def _assert_untouched(results: list[SkillExecutionResult]) -> None:
    for index, result in enumerate(results):
        assert (result.exit_code, result.timed_out) == (0, False), result
        assert result.stdout == f"started-{index}\ndone-{index}\n"


@pytest.fixture
def runtime(opensandbox_double: OpenSandboxDouble) -> Iterator[OpenSandboxSkillRuntime]:
    runtime = OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
    )
    yield runtime
    runtime.close()


def test_short_commands_beside_long_ones_kill_none_of_them(
    runtime: OpenSandboxSkillRuntime, opensandbox_double: OpenSandboxDouble
) -> None:
    assert runtime.execute(SkillExecutionRequest(command="true")).ok
    sandbox_id = runtime.sandbox_id
    assert sandbox_id is not None
    token = uuid.uuid4().hex
    hangups = opensandbox_double.stats()["grace_hangups"]
    with ThreadPoolExecutor(LONG_COMMANDS + 2) as pool:
        longs = [pool.submit(runtime.execute, _long(token, i)) for i in range(LONG_COMMANDS)]
        assert wait_until(lambda: _all_started(opensandbox_double, sandbox_id, token))
        shorts = [
            pool.submit(runtime.execute, SkillExecutionRequest(command="echo short"))
            for _ in range(SHORT_COMMANDS)
        ]
        for _ in range(SHORT_COMMANDS):
            assert runtime.execute(SkillExecutionRequest(command="true")).ok
        assert all(future.result().stdout == "short\n" for future in shorts)
        _assert_untouched([future.result() for future in longs])
    runtime.close()  # waits for the streams still being read to their end
    assert opensandbox_double.stats()["grace_hangups"] == hangups


def test_async_short_commands_beside_long_ones_kill_none_of_them(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    token = uuid.uuid4().hex

    async def scenario() -> tuple[list[SkillExecutionResult], list[SkillExecutionResult], int]:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        ) as runtime:
            assert (await runtime.execute(SkillExecutionRequest(command="true"))).ok
            sandbox_id = runtime.sandbox_id
            assert sandbox_id is not None
            hangups = opensandbox_double.stats()["grace_hangups"]
            longs = [
                asyncio.ensure_future(runtime.execute(_long(token, i)))
                for i in range(LONG_COMMANDS)
            ]
            assert await asyncio.to_thread(
                wait_until, lambda: _all_started(opensandbox_double, sandbox_id, token)
            )
            shorts = await asyncio.gather(
                *(
                    runtime.execute(SkillExecutionRequest(command="echo short"))
                    for _ in range(SHORT_COMMANDS)
                )
            )
            for _ in range(SHORT_COMMANDS):
                assert (await runtime.execute(SkillExecutionRequest(command="true"))).ok
            return list(shorts), list(await asyncio.gather(*longs)), hangups

    shorts, longs, hangups = asyncio.run(scenario())
    assert all(result.stdout == "short\n" for result in shorts)
    _assert_untouched(longs)
    assert opensandbox_double.stats()["grace_hangups"] == hangups


async def _visit_async(options: dict[str, Any]) -> None:
    async with AsyncOpenSandboxSkillRuntime(**options) as visitor:
        assert (await visitor.execute(SkillExecutionRequest(command="true"))).ok


def test_conversation_runtimes_keep_their_neighbours_alive_through_close(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    """Runtimes of one conversation share its sandbox: one closing right after a command (its
    stream still in execd's grace period), sync or async, kills nothing of another's."""
    store = InMemoryConversationStore()
    options = {
        "domain": opensandbox_double.domain,
        "api_key": opensandbox_double.api_key,
        "conversation_id": f"hangup-{uuid.uuid4().hex[:8]}",
        "conversation_store": store,
    }
    token = uuid.uuid4().hex
    hangups = opensandbox_double.stats()["grace_hangups"]
    with OpenSandboxSkillRuntime(**options) as keeper:
        assert keeper.execute(SkillExecutionRequest(command="true")).ok
        sandbox_id = keeper.sandbox_id
        assert sandbox_id is not None
        with ThreadPoolExecutor(LONG_COMMANDS) as pool:
            longs = [
                pool.submit(keeper.execute, _long(token, i, seconds=10.0))
                for i in range(LONG_COMMANDS)
            ]
            assert wait_until(lambda: _all_started(opensandbox_double, sandbox_id, token))
            for _ in range(2):
                with OpenSandboxSkillRuntime(**options) as visitor:
                    assert visitor.execute(SkillExecutionRequest(command="true")).ok
            for _ in range(2):
                asyncio.run(_visit_async(options))
            _assert_untouched([future.result() for future in longs])
        keeper.destroy_conversation_sandbox()
    assert opensandbox_double.stats()["grace_hangups"] == hangups


_SELF_KILLING = "kill -KILL $PPID; sleep 30.{token}"
"""Kills its own wrapper (the shell that started it), then runs on: only the wrapper's watchdog
ends it, at the command's deadline. ``token`` (digits) tells its ``sleep`` apart."""


def _token() -> str:
    return str(uuid.uuid4().int % 10**12)


def _probe(token: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=f"ps -eo args | grep -x 'sleep 30.{token}'")


def _still_running(runtime: OpenSandboxSkillRuntime, token: str) -> bool:
    return runtime.execute(_probe(token)).exit_code == 0


def test_a_wrapper_killed_before_its_report_is_an_error_raised_after_the_deadline(
    runtime: OpenSandboxSkillRuntime,
) -> None:
    token = _token()
    with pytest.raises(CommandOutcomeUnknownError):
        runtime.execute(
            SkillExecutionRequest(command=_SELF_KILLING.format(token=token), timeout_seconds=2.0)
        )
    assert not _still_running(runtime, token)


def test_async_a_wrapper_killed_before_its_report_is_an_error_raised_after_the_deadline(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    token = _token()

    async def scenario() -> bool:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        ) as runtime:
            with pytest.raises(CommandOutcomeUnknownError):
                await runtime.execute(
                    SkillExecutionRequest(
                        command=_SELF_KILLING.format(token=token), timeout_seconds=2.0
                    )
                )
            return (await runtime.execute(_probe(token))).exit_code == 0

    assert not asyncio.run(scenario())


def test_an_exclusive_lease_is_held_until_a_command_without_report_has_ended(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    """The next holder of the conversation's lease never runs beside the command whose wrapper
    died: the lease is released only once that command's watchdog has ended it."""
    options = {
        "domain": opensandbox_double.domain,
        "api_key": opensandbox_double.api_key,
        "conversation_id": f"unknown-{uuid.uuid4().hex[:8]}",
        "conversation_store": InMemoryConversationStore(),
        "exclusive": True,
        "lease_wait_seconds": 60.0,
    }
    token = _token()
    with (
        OpenSandboxSkillRuntime(**options) as first,
        OpenSandboxSkillRuntime(**options) as second,
        ThreadPoolExecutor(1) as pool,
    ):
        assert first.execute(SkillExecutionRequest(command="true")).ok
        sandbox_id = first.sandbox_id
        assert sandbox_id is not None
        tmp = opensandbox_double.workspace_of(sandbox_id).parent / "tmp"
        doomed = pool.submit(
            first.execute,
            SkillExecutionRequest(
                command=f"touch /tmp/{token}; " + _SELF_KILLING.format(token=token),
                timeout_seconds=2.0,
            ),
        )
        assert wait_until((tmp / token).exists)
        assert not _still_running(second, token)  # waited for the lease
        with pytest.raises(CommandOutcomeUnknownError):
            doomed.result()
        first.destroy_conversation_sandbox()


def test_fifty_concurrent_commands_over_five_conversations_all_complete(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    """Five conversations' async runtimes, ten commands each in flight at once, short ones
    beside ones that sleep: every command completes with its own output."""
    store = InMemoryConversationStore()
    prefix = uuid.uuid4().hex[:8]

    def request(index: int) -> SkillExecutionRequest:
        sleep = "sleep 1.5; " if index % 2 else ""
        return SkillExecutionRequest(command=f"{sleep}echo {index}", timeout_seconds=30.0)

    async def conversation(number: int) -> list[SkillExecutionResult]:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=f"fifty-{prefix}-{number}",
            conversation_store=store,
        ) as runtime:
            results = await asyncio.gather(
                *(asyncio.wait_for(runtime.execute(request(i)), 60.0) for i in range(10))
            )
            await runtime.destroy_conversation_sandbox()
            return list(results)

    async def scenario() -> list[list[SkillExecutionResult]]:
        return list(await asyncio.gather(*(conversation(n) for n in range(5))))

    hangups = opensandbox_double.stats()["grace_hangups"]
    for results in asyncio.run(scenario()):
        assert [(r.exit_code, r.stdout) for r in results] == [(0, f"{i}\n") for i in range(10)]
    assert opensandbox_double.stats()["grace_hangups"] == hangups
