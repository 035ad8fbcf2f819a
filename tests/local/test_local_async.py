"""The native async local runtime: what the kit does not already prove."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from skillruntime.core.errors import ExecutionTransportError, RuntimeClosedError
from skillruntime.core.models import (
    BootstrapCommand,
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.plugins.registry import create_async_runtime
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.local.async_process import run_command_async


def _request(command: str, **kwargs: object) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=command, **kwargs)  # type: ignore[arg-type]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in {"Z", "X"}


async def _wait_gone(pid: int) -> bool:
    for _ in range(100):
        if _gone(pid):
            return True
        await asyncio.sleep(0.05)
    return _gone(pid)


async def _read_pid(path: Path) -> int:
    for _ in range(400):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.02)
    raise AssertionError("the command did not write its pid")


def _runtime(tmp_path: Path) -> AsyncLocalSkillRuntime:
    return AsyncLocalSkillRuntime(work_root=tmp_path / "work", kill_grace_seconds=0.3)


def test_plugin_builds_the_native_async_runtime(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with create_async_runtime("local", work_root=str(tmp_path)) as runtime:
            assert isinstance(runtime, AsyncLocalSkillRuntime)
            assert (await runtime.execute(_request("echo native"))).stdout == "native\n"

    asyncio.run(scenario())


def test_close_kills_running_commands_whose_execute_raises_closed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"

    async def scenario() -> None:
        runtime = _runtime(tmp_path)
        task = asyncio.create_task(
            runtime.execute(_request(f"sleep 60 & echo $! > '{pid_file}'; wait"))
        )
        pid = await _read_pid(pid_file)
        await runtime.close()
        with pytest.raises(RuntimeClosedError):
            await task
        assert await _wait_gone(pid)
        with pytest.raises(RuntimeClosedError):
            await runtime.execute(_request("true"))

    asyncio.run(scenario())


def test_cancelling_a_flooding_command_kills_it_and_keeps_the_runtime(tmp_path: Path) -> None:
    pid_file = tmp_path / "yes.pid"

    async def scenario() -> None:
        async with _runtime(tmp_path) as runtime:
            task = asyncio.create_task(
                runtime.execute(_request(f"echo $$ > '{pid_file}'; exec yes flood"))
            )
            pid = await _read_pid(pid_file)
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await _wait_gone(pid)
            assert (await runtime.execute(_request("echo after"))).stdout == "after\n"

    asyncio.run(scenario())


def test_commands_run_without_a_thread_each(tmp_path: Path) -> None:
    # Threads other tests of the same process left running are not this runtime's.
    before = threading.active_count()

    async def scenario() -> tuple[int, list[str]]:
        async with _runtime(tmp_path) as runtime:
            gate = tmp_path / "gate"
            started = tmp_path / "started"
            started.mkdir()
            tasks = [
                asyncio.create_task(
                    runtime.execute(
                        _request(
                            f"touch '{started}/{index}'; "
                            f"while [ ! -e '{gate}' ]; do sleep 0.05; done; echo {index}"
                        )
                    )
                )
                for index in range(40)
            ]
            while len(os.listdir(started)) < 40:
                await asyncio.sleep(0.05)
            threads = threading.active_count()
            gate.touch()
            results = await asyncio.gather(*tasks)
            return threads, [result.stdout.strip() for result in results]

    threads, outputs = asyncio.run(scenario())
    assert outputs == [str(index) for index in range(40)]
    added = threads - before
    # At most the process-wide spawn pool (4) and a little of asyncio's own machinery.
    assert added <= 7, f"{added} new threads for 40 running commands"


def test_exit_by_signal_reports_128_plus_n(tmp_path: Path) -> None:
    async def scenario() -> int:
        async with _runtime(tmp_path) as runtime:
            return (await runtime.execute(_request("kill -TERM $$"))).exit_code

    assert asyncio.run(scenario()) == 128 + signal.SIGTERM


def test_missing_working_directory_is_a_transport_error(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _runtime(tmp_path) as runtime:
            with pytest.raises(ExecutionTransportError):
                await runtime.execute(_request("true", working_directory="no-such-dir"))

    asyncio.run(scenario())


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "waiter-thread"])
def test_timeout_and_cancellation_kill_the_group_with_either_exit_notifier(
    tmp_path: Path, use_pidfd: bool
) -> None:
    pid_file = tmp_path / "grandchild.pid"

    async def run(command: str, timeout: float) -> object:
        return await run_command_async(
            ["/bin/sh", "-c", command],
            cwd=str(tmp_path),
            env=None,
            timeout=timeout,
            max_output_bytes=1024,
            kill_grace=0.2,
            use_pidfd=use_pidfd,
        )

    async def scenario() -> None:
        result = await run(f"echo partial; sleep 30 & echo $! > '{pid_file}'; wait", 0.5)
        assert result.timed_out is True
        assert result.stdout == "partial\n"
        assert await _wait_gone(int(pid_file.read_text()))
        pid_file.unlink()
        task = asyncio.create_task(run(f"sleep 30 & echo $! > '{pid_file}'; wait", 60))
        pid = await _read_pid(pid_file)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _wait_gone(pid)

    asyncio.run(scenario())


def test_sync_and_async_runtimes_resume_one_conversation(tmp_path: Path) -> None:
    source = tmp_path / "skills" / "resumable"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text("---\nname: resumable\ndescription: d\n---\nbody\n")
    log = tmp_path / "bootstrap.log"
    config = SkillRuntimeConfig(
        bootstrap=(BootstrapCommand(command=f"echo run >> '{log}'"),),
        environment={"RESUMED": "yes"},
    )
    skill = Skill(name="resumable", description="d", base_path=str(source))
    request = SkillPreparationRequest(skills=(skill,), configs={"resumable": config})
    root = tmp_path / "conversations"
    with LocalSkillRuntime(conversation_id="shared", conversations_root=root) as sync_runtime:
        (prepared_sync,) = sync_runtime.prepare(request)

    async def scenario() -> tuple[str, str]:
        async with AsyncLocalSkillRuntime(conversation_id="shared", conversations_root=root) as rt:
            (prepared,) = await rt.prepare(request)
            result = await rt.execute(_request("echo $RESUMED"))
            return prepared.base_path, result.stdout

    base_path, stdout = asyncio.run(scenario())
    assert base_path == prepared_sync.base_path
    assert stdout == "yes\n"
    assert log.read_text() == "run\n", "the async runtime bootstrapped a copy already prepared"
