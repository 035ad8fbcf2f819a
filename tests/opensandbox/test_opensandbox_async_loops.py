"""One async runtime object serves consecutive event loops without killing anything.

Programs call ``asyncio.run`` once per request (and frameworks run sync-over-async calls on a
loop of their own): each loop ends right after the call returned. A command's result comes at
its report, while execd keeps the stream open about a second longer, and a client that hangs up
in that second makes execd kill every command running in the sandbox (the double does the same
and counts ``grace_hangups``). So the end of the caller's loop must never cut a stream: these
tests run a long command beside one runtime object used by many short-lived loops.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from doubles._polling import wait_until
from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.files.search import GlobQuery
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

opensandbox_double = opensandbox_double_fixture(scope="module")
"""A double of this module's own, with execd's 1 s linger (the suite's is scaled down)."""

LOOPS = 6


@pytest.fixture
def options(opensandbox_double: OpenSandboxDouble) -> dict[str, Any]:
    """Runtimes of one conversation: they share its sandbox."""
    return {
        "domain": opensandbox_double.domain,
        "api_key": opensandbox_double.api_key,
        "conversation_id": f"loops-{uuid.uuid4().hex[:8]}",
        "conversation_store": InMemoryConversationStore(),
    }


@pytest.fixture
def neighbour(options: dict[str, Any]) -> Iterator[OpenSandboxSkillRuntime]:
    """A sync runtime on the conversation, whose sandbox it destroys at the end."""
    with OpenSandboxSkillRuntime(**options) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok
        yield runtime
        runtime.destroy_conversation_sandbox()


@pytest.fixture
def runtime(options: dict[str, Any]) -> Iterator[AsyncOpenSandboxSkillRuntime]:
    """An async runtime built outside any event loop, as applications build it once."""
    runtime = AsyncOpenSandboxSkillRuntime(**options)
    yield runtime
    asyncio.run(runtime.close())


def _start_long(
    pool: ThreadPoolExecutor,
    runtime: OpenSandboxSkillRuntime,
    double: OpenSandboxDouble,
    seconds: float = 3.0,
) -> Future[SkillExecutionResult]:
    """Start ``echo started; sleep`` through ``runtime`` in a thread and wait until it runs."""
    token = uuid.uuid4().hex
    sandbox_id = runtime.sandbox_id
    assert sandbox_id is not None
    marker = double.workspace_of(sandbox_id).parent / "tmp" / token
    future = pool.submit(
        runtime.execute,
        SkillExecutionRequest(
            command=f"echo started; touch /tmp/{token}; sleep {seconds:g}; echo done",
            timeout_seconds=10.0,
        ),
    )
    assert wait_until(marker.exists)
    return future


def _assert_finished(future: Future[SkillExecutionResult]) -> None:
    result = future.result()
    assert (result.exit_code, result.timed_out) == (0, False), result
    assert result.stdout == "started\ndone\n"


def test_consecutive_loops_kill_no_command_running_beside_them(
    opensandbox_double: OpenSandboxDouble,
    neighbour: OpenSandboxSkillRuntime,
    runtime: AsyncOpenSandboxSkillRuntime,
) -> None:
    hangups = opensandbox_double.stats()["grace_hangups"]
    with ThreadPoolExecutor(1) as pool:
        long = _start_long(pool, neighbour, opensandbox_double)
        for _ in range(LOOPS):
            result = asyncio.run(runtime.execute(SkillExecutionRequest(command="true")))
            assert (result.exit_code, result.timed_out) == (0, False)
        assert runtime.sandbox_id == neighbour.sandbox_id
        _assert_finished(long)
    assert opensandbox_double.stats()["grace_hangups"] == hangups


def test_loops_mixing_file_operations_kill_no_command_running_beside_them(
    opensandbox_double: OpenSandboxDouble,
    neighbour: OpenSandboxSkillRuntime,
    runtime: AsyncOpenSandboxSkillRuntime,
) -> None:
    """File calls (plain requests) and a search (one command) on loops of their own, between
    commands on others."""

    async def files(index: int) -> list[str]:
        fs = await runtime.get_file_system()
        await fs.write_text(f"loops/{index}.txt", f"{index}\n")
        assert await fs.read_text(f"loops/{index}.txt") == f"{index}\n"
        root = await fs.stat("loops")
        assert root is not None
        found = await fs.glob(root, GlobQuery(pattern="*.txt"))
        return sorted(entry.path.rsplit("/", 1)[1] for entry in found.entries)

    hangups = opensandbox_double.stats()["grace_hangups"]
    with ThreadPoolExecutor(1) as pool:
        long = _start_long(pool, neighbour, opensandbox_double)
        for index in range(LOOPS // 2):
            assert asyncio.run(files(index)) == [f"{n}.txt" for n in range(index + 1)]
            result = asyncio.run(runtime.execute(SkillExecutionRequest(command="echo x")))
            assert (result.exit_code, result.stdout) == (0, "x\n")
        _assert_finished(long)
    assert opensandbox_double.stats()["grace_hangups"] == hangups


def test_a_cancelled_command_is_interrupted_and_its_stream_outlives_the_loop(
    opensandbox_double: OpenSandboxDouble,
    neighbour: OpenSandboxSkillRuntime,
    runtime: AsyncOpenSandboxSkillRuntime,
) -> None:
    """Cancelling interrupts the command through execd before ``CancelledError`` propagates;
    the loop then ends at once, and the interrupted command's stream is still read to its end."""
    token = str(uuid.uuid4().int % 10**12)
    sandbox_id = neighbour.sandbox_id
    assert sandbox_id is not None
    marker = opensandbox_double.workspace_of(sandbox_id).parent / "tmp" / f"c{token}"

    async def cancelled() -> None:
        task = asyncio.create_task(
            runtime.execute(
                SkillExecutionRequest(
                    command=f"touch /tmp/c{token}; sleep 30.{token}", timeout_seconds=60.0
                )
            )
        )
        assert await asyncio.to_thread(wait_until, marker.exists)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    hangups = opensandbox_double.stats()["grace_hangups"]
    with ThreadPoolExecutor(1) as pool:
        long = _start_long(pool, neighbour, opensandbox_double, seconds=4.0)
        asyncio.run(cancelled())
        probe = SkillExecutionRequest(command=f"ps -eo args | grep -x 'sleep 30.{token}'")
        assert asyncio.run(runtime.execute(probe)).exit_code == 1  # killed, not running on
        assert asyncio.run(runtime.execute(SkillExecutionRequest(command="true"))).ok
        _assert_finished(long)
    assert opensandbox_double.stats()["grace_hangups"] == hangups


def _command_loops() -> int:
    return sum(thread.name == "opensandbox-commands" for thread in threading.enumerate())


def test_one_thread_serves_every_loop_and_close_ends_it(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    """The streams of all callers' loops are read by one thread of the runtime, started by its
    first command; ``close`` ends it (the runtime leaves no thread behind)."""
    before = _command_loops()
    runtime = AsyncOpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
    )
    assert _command_loops() == before
    for _ in range(3):
        assert asyncio.run(runtime.execute(SkillExecutionRequest(command="true"))).ok
        assert _command_loops() == before + 1
    asyncio.run(runtime.close())
    assert _command_loops() == before
