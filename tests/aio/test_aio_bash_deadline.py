"""A ``/v1/bash`` command past its deadline: the runtime kills the command's whole process tree
itself, also on a service whose ``hard_timeout`` kills only the process it started."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from doubles._polling import wait_until
from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.errors import ExecutionTransportError
from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult

ROOT = "/home/gem/workspace/conversations"

# The command's own shell, two background sleeps and a nohup'd one (each holding no pipe of the
# service: their streams are the wrapper's files), then a wait that outlasts the deadline.
_TREE = (
    "echo $BASHPID >> {pids}; sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; "
    "nohup sleep 300 >/dev/null 2>&1 & echo $! >> {pids}; echo started; wait"
)


@pytest.fixture(scope="module", params=["process", "group"])
def double(request: pytest.FixtureRequest) -> Iterator[AioDouble]:
    """A service whose ``hard_timeout`` kills only the started process, and the default one
    that kills its process group."""
    with AioDouble(hard_timeout_kills=request.param) as aio:
        yield aio


def _request(pids: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=_TREE.format(pids=pids), timeout_seconds=1.5)


def _survivors(double: AioDouble, pids: str) -> list[int]:
    found = [int(pid) for pid in double.host_path(pids).read_text().split()]
    assert len(found) == 4
    wait_until(lambda: all(double.process_gone(pid) for pid in found), timeout=10)
    return [pid for pid in found if not double.process_gone(pid)]


def _check(result: SkillExecutionResult) -> None:
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert result.stdout == "started\n"


def test_the_sync_runtime_leaves_no_process_of_a_timed_out_command(double: AioDouble) -> None:
    pids = f"/tmp/tree-{uuid.uuid4().hex[:8]}.pids"
    with AioSandboxSkillRuntime(
        base_url=double.url, token=double.token, conversation_id="deadline", conversations_root=ROOT
    ) as rt:
        assert rt.command_api == "bash"
        _check(rt.execute(_request(pids)))
        assert _survivors(double, pids) == []
        assert rt.execute(SkillExecutionRequest(command="echo next")).stdout == "next\n"


def test_the_async_runtime_leaves_no_process_of_a_timed_out_command(double: AioDouble) -> None:
    pids = f"/tmp/tree-{uuid.uuid4().hex[:8]}.pids"

    async def main() -> None:
        async with AsyncAioSkillRuntime(
            base_url=double.url,
            token=double.token,
            conversation_id="deadline-async",
            conversations_root=ROOT,
        ) as rt:
            _check(await rt.execute(_request(pids)))
            assert _survivors(double, pids) == []
            next_one = await rt.execute(SkillExecutionRequest(command="echo next"))
            assert next_one.stdout == "next\n"

    asyncio.run(main())


def test_a_command_that_kills_the_wrapper_leaves_no_process_behind(double: AioDouble) -> None:
    """``$$`` is the wrapper's pid: killing it ends the request without a result (a transport
    error), and the follow-up still kills the command's process group."""
    pids = f"/tmp/tree-{uuid.uuid4().hex[:8]}.pids"
    command = f"sleep 300 & echo $! >> {pids}; kill -KILL $$; wait"
    with AioSandboxSkillRuntime(
        base_url=double.url, token=double.token, conversation_id="suicide", conversations_root=ROOT
    ) as rt:
        with pytest.raises(ExecutionTransportError):
            rt.execute(SkillExecutionRequest(command=command, timeout_seconds=60))
        found = [int(pid) for pid in double.host_path(pids).read_text().split()]
        assert len(found) == 1
        assert wait_until(lambda: double.process_gone(found[0]), timeout=10)
        assert rt.execute(SkillExecutionRequest(command="echo next")).stdout == "next\n"
