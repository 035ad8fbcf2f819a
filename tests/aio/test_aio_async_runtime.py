"""What the native async AIO runtime does beyond the kit: the async client's error mapping and
retry rules, the plugin's native factory, no thread per command, the kill sweep that stops a
cancelled command's processes (closing its session alone would not), and close() killing the
commands still running."""

from __future__ import annotations

import asyncio
import posixpath
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import (
    AioNotFoundError,
    AioOperationError,
    AioRequestError,
    AioSandboxSkillRuntime,
    AioServerError,
    AsyncAioSkillRuntime,
)
from skillruntime.core.errors import ExecutionTransportError, RuntimeClosedError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.plugins.registry import create_async_runtime
from skillruntime.core.testing.execute_contracts import process_is_dead_command

ROOT = "/home/gem/workspace/conversations"

T = TypeVar("T")


def _requests(double: AioDouble, route: str) -> int:
    counts: dict[str, int] = double.stats()["requests"]
    return counts.get(route, 0)


def _runtime(double: AioDouble, conversation: str | None = None, **kwargs: Any) -> Any:
    return AsyncAioSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=conversation or f"c-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
        **kwargs,
    )


def _with_runtime(double: AioDouble, scenario: Callable[[AsyncAioSkillRuntime], Awaitable[T]]) -> T:
    async def main() -> T:
        async with _runtime(double) as rt:
            return await scenario(rt)

    return asyncio.run(main())


def test_the_plugin_builds_the_native_runtime(aio_bash: AioDouble) -> None:
    async def main() -> str:
        async with create_async_runtime(
            "aio", base_url=aio_bash.url, token=aio_bash.token, conversation_id="plugin"
        ) as rt:
            assert isinstance(rt, AsyncAioSkillRuntime)
            return (await rt.execute(SkillExecutionRequest(command="echo native"))).stdout

    assert asyncio.run(main()) == "native\n"


@pytest.mark.parametrize("fixture", ["aio_bash", "aio_shell"])
def test_the_command_api_is_detected(fixture: str, request: pytest.FixtureRequest) -> None:
    double: AioDouble = request.getfixturevalue(fixture)

    async def scenario(rt: AsyncAioSkillRuntime) -> str:
        return await rt.command_api()

    assert _with_runtime(double, scenario) == fixture.removeprefix("aio_")


def test_envelope_and_status_errors_are_mapped(aio_bash: AioDouble) -> None:
    async def scenario(rt: AsyncAioSkillRuntime) -> None:
        client = rt.client
        with pytest.raises(AioRequestError, match="422") as invalid:
            await client.call("POST", "/v1/shell/exec", json={"not_command": "x"})
        assert "command" in str(invalid.value)
        with pytest.raises(AioNotFoundError, match="404"):
            await client.call("GET", "/v1/no-such-endpoint")
        with pytest.raises(AioOperationError) as failed:
            await client.call("POST", "/v1/file/read", json={"file": "/home/gem/missing-file"})
        assert failed.value.error_type == "not_found"
        aio_bash.inject_fault("GET /v1/sandbox", 200, body={"success": False, "message": "boom"})
        with pytest.raises(AioOperationError, match="boom"):
            await client.call("GET", "/v1/sandbox")
        aio_bash.inject_fault("GET /v1/sandbox", 500)
        aio_bash.reset_stats()
        with pytest.raises(AioServerError, match="500"):
            await client.call("GET", "/v1/sandbox", idempotent=True)
        assert _requests(aio_bash, "GET /v1/sandbox") == 1  # 500 is not retried

    _with_runtime(aio_bash, scenario)


def test_idempotent_transfers_are_retried_on_gateway_errors(aio_bash: AioDouble) -> None:
    async def scenario(rt: AsyncAioSkillRuntime) -> None:
        fs = await rt.get_file_system()
        await fs.write_bytes("blob.bin", bytes(range(256)))
        aio_bash.reset_stats()
        aio_bash.inject_fault("GET /v1/file/download", 503, count=2)
        assert await fs.read_bytes("blob.bin") == bytes(range(256))
        assert _requests(aio_bash, "GET /v1/file/download") == 3
        aio_bash.inject_fault("GET /v1/file/download", 0, count=1)  # dropped connection
        assert await fs.read_bytes("blob.bin") == bytes(range(256))
        aio_bash.inject_fault("/v1/file/upload", 502, count=1)
        await fs.write_text("again.txt", "uploaded after a retry")
        assert await fs.read_text("again.txt") == "uploaded after a retry"

    _with_runtime(aio_bash, scenario)


def test_commands_are_never_retried(aio_bash: AioDouble) -> None:
    async def scenario(rt: AsyncAioSkillRuntime) -> None:
        await rt.execute(SkillExecutionRequest(command="true"))
        aio_bash.reset_stats()
        aio_bash.inject_fault("POST /v1/bash/exec", 503, count=1)
        with pytest.raises(ExecutionTransportError, match="503"):
            await rt.execute(SkillExecutionRequest(command="echo x >> attempts.txt"))
        assert _requests(aio_bash, "POST /v1/bash/exec") == 1
        assert await (await rt.get_file_system()).stat("attempts.txt") is None

    _with_runtime(aio_bash, scenario)


def test_unreachable_service_is_a_clear_transport_error() -> None:
    async def main() -> None:
        async with AsyncAioSkillRuntime(
            base_url="http://127.0.0.1:9",
            conversation_id="x",
            conversations_root=ROOT,
            connect_timeout=1,
            retry_attempts=1,
        ) as rt:
            with pytest.raises(ExecutionTransportError, match="Cannot reach"):
                await rt.execute(SkillExecutionRequest(command="true"))

    asyncio.run(main())


def test_concurrent_commands_start_no_thread_per_command(aio_bash: AioDouble) -> None:
    async def scenario(rt: AsyncAioSkillRuntime) -> tuple[list[str], int, int]:
        await rt.execute(SkillExecutionRequest(command="true"))
        before = threading.active_count()
        peak = before

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, threading.active_count())
                await asyncio.sleep(0.01)

        sampler = asyncio.create_task(sample())
        results = await asyncio.gather(
            *(rt.execute(SkillExecutionRequest(command=f"sleep 0.3; echo {n}")) for n in range(40))
        )
        sampler.cancel()
        return [r.stdout for r in results], before, peak

    outputs, before, peak = _with_runtime(aio_bash, scenario)
    assert outputs == [f"{n}\n" for n in range(40)]
    assert peak == before


_TREE = "sh -c 'sleep 60 & echo $! > {pid}; wait' & sleep 60"


async def _start_tree(rt: AsyncAioSkillRuntime, pid_file: str) -> asyncio.Task[Any]:
    """A command whose grandchild writes its pid to ``pid_file``, started and running."""
    task = asyncio.create_task(
        rt.execute(SkillExecutionRequest(command=_TREE.format(pid=pid_file), timeout_seconds=120))
    )
    fs = await rt.get_file_system()
    while not await fs.exists(pid_file):
        await asyncio.sleep(0.05)
    return task


def _state(double: AioDouble, conversation: str, pid_file: str) -> str:
    """``dead`` (or an unreaped zombie) or ``alive``, seen by a sync runtime; then killed."""
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=conversation,
        conversations_root=ROOT,
    ) as sync_rt:
        state = sync_rt.execute(
            SkillExecutionRequest(command=process_is_dead_command(pid_file, 2.0))
        ).stdout
        sync_rt.execute(
            SkillExecutionRequest(command=f"kill -9 $(cat {pid_file}) 2>/dev/null; true")
        )
        return state.strip()


@pytest.mark.parametrize("fixture", ["aio_bash", "aio_shell"])
def test_close_kills_running_commands(fixture: str, request: pytest.FixtureRequest) -> None:
    double: AioDouble = request.getfixturevalue(fixture)
    conversation = f"close-{uuid.uuid4().hex[:8]}"
    pid_file = posixpath.join(ROOT, conversation, "closed.pid")

    async def main() -> None:
        rt = _runtime(double, conversation)
        task = await _start_tree(rt, pid_file)
        await rt.close()
        with pytest.raises(RuntimeClosedError):
            await task

    asyncio.run(main())
    assert _state(double, conversation, pid_file) == "dead"


@pytest.mark.parametrize("fixture", ["aio_bash", "aio_shell"])
def test_the_kill_sweep_is_what_stops_a_cancelled_tree(
    fixture: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the sweep disabled, the cancelled command's grandchild outlives its closed session
    (on ``/v1/bash`` the command runs in a process group of its own, which closing the session
    does not kill); with it, the grandchild is dead (or an unreaped zombie) when the
    cancellation returns."""
    double: AioDouble = request.getfixturevalue(fixture)
    conversation = f"sweep-{uuid.uuid4().hex[:8]}"

    async def main(pid_file: str) -> None:
        async with _runtime(double, conversation) as rt:
            task = await _start_tree(rt, pid_file)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    workspace = posixpath.join(ROOT, conversation)
    asyncio.run(main(posixpath.join(workspace, "with-sweep.pid")))
    assert _state(double, conversation, posixpath.join(workspace, "with-sweep.pid")) == "dead"

    async def no_sweep(self: AsyncAioSkillRuntime, token: str) -> None:
        return None

    monkeypatch.setattr(AsyncAioSkillRuntime, "_kill", no_sweep)
    asyncio.run(main(posixpath.join(workspace, "without-sweep.pid")))
    assert _state(double, conversation, posixpath.join(workspace, "without-sweep.pid")) == "alive"


@pytest.mark.parametrize("fixture", ["aio_bash", "aio_shell"])
def test_one_runtime_serves_consecutive_asyncio_run_calls(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """Each ``asyncio.run`` is a new loop: the runtime opens a connection pool on it and closes
    that pool when the loop shuts down (no socket of a closed loop is ever reused)."""
    double: AioDouble = request.getfixturevalue(fixture)
    rt = _runtime(double)
    try:
        for n in range(4):
            result = asyncio.run(rt.execute(SkillExecutionRequest(command=f"echo {n}")))
            assert (result.exit_code, result.stdout) == (0, f"{n}\n")
            assert rt.client._pools._slots == {}  # closed with its loop
    finally:
        asyncio.run(rt.close())
