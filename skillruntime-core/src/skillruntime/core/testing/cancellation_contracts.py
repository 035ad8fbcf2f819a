"""Contracts of cancellation: a cancelled ``execute`` kills the command's process tree.

They drive the async runtime directly on the loop of the kit's async driver
(:class:`~skillruntime.core.runtime.bridge.LoopThreadRuntime`) and check the outcome through the
sync view, inside the runtime (``kill -0`` on the grandchild's pid), so they hold for remote
runtimes.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath

import pytest

from ..models import SkillExecutionRequest
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.bridge import LoopThreadRuntime
from .base import ConformanceBase
from .context import ConformanceContext
from .execute_contracts import process_is_dead_command

__all__ = ["CancellationContracts"]

_START_SECONDS = 30.0


def _tree_command(pid_file: str) -> str:
    return f"sh -c 'sleep 60 & echo $! > \"{pid_file}\"; wait' & sleep 60"


async def _wait_for_file(runtime: AsyncSkillRuntime, path: str) -> None:
    files = await runtime.get_file_system()
    loop = asyncio.get_running_loop()
    give_up = loop.time() + _START_SECONDS
    while not await files.exists(path):
        if loop.time() > give_up:
            raise AssertionError(f"the command did not start within {_START_SECONDS:g}s")
        await asyncio.sleep(0.05)


class CancellationContracts(ConformanceBase):
    """Cancelling an awaiting ``execute`` (``task.cancel()`` or ``asyncio.timeout``) kills the
    whole process tree and leaves the runtime usable."""

    def _driver(self, conformance: ConformanceContext) -> LoopThreadRuntime:
        runtime = conformance.runtime()
        assert isinstance(runtime, LoopThreadRuntime), "the async driver makes LoopThreadRuntime"
        return runtime

    def _assert_tree_dead_and_usable(
        self, conformance: ConformanceContext, runtime: LoopThreadRuntime, pid_file: str
    ) -> None:
        state = conformance.check_output(
            runtime, process_is_dead_command(pid_file, self.kill_settle_seconds), timeout=60
        )
        assert state.strip() == "dead", "a grandchild survived the cancellation"
        assert conformance.check_output(runtime, "echo still-usable") == "still-usable\n"

    def _kill_later(
        self, conformance: ConformanceContext, runtime: LoopThreadRuntime, pid_file: str
    ) -> None:
        def kill() -> None:
            with contextlib.suppress(Exception):
                conformance.run(runtime, f"kill -9 $(cat '{pid_file}') 2>/dev/null; true")

        conformance.add_cleanup(kill)

    def test_cancelling_execute_kills_the_process_tree(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = self._driver(conformance)
        native = runtime.async_runtime
        pid_file = posixpath.join(conformance.workspace(), "kit-cancel.pid")
        self._kill_later(conformance, runtime, pid_file)

        async def scenario() -> None:
            request = SkillExecutionRequest(command=_tree_command(pid_file), timeout_seconds=120)
            task = asyncio.create_task(native.execute(request))
            await _wait_for_file(native, pid_file)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        runtime.call(scenario())
        self._assert_tree_dead_and_usable(conformance, runtime, pid_file)

    def test_asyncio_timeout_kills_the_process_tree(self, conformance: ConformanceContext) -> None:
        runtime = self._driver(conformance)
        native = runtime.async_runtime
        pid_file = posixpath.join(conformance.workspace(), "kit-deadline.pid")
        self._kill_later(conformance, runtime, pid_file)

        async def run_under_deadline() -> None:
            request = SkillExecutionRequest(command=_tree_command(pid_file), timeout_seconds=120)
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(None) as deadline:
                started = asyncio.ensure_future(_wait_for_file(native, pid_file))
                started.add_done_callback(lambda _: deadline.reschedule(loop.time() + 0.1))
                try:
                    await native.execute(request)
                finally:
                    started.cancel()

        async def scenario() -> None:
            with pytest.raises(TimeoutError):
                await run_under_deadline()

        runtime.call(scenario())
        self._assert_tree_dead_and_usable(conformance, runtime, pid_file)

    def test_cancelled_commands_leave_concurrent_ones_alone(
        self, conformance: ConformanceContext
    ) -> None:
        runtime = self._driver(conformance)
        native = runtime.async_runtime
        pid_file = posixpath.join(conformance.workspace(), "kit-cancel-one.pid")
        self._kill_later(conformance, runtime, pid_file)

        async def scenario() -> str:
            doomed = asyncio.create_task(
                native.execute(
                    SkillExecutionRequest(command=_tree_command(pid_file), timeout_seconds=120)
                )
            )
            survivor = asyncio.create_task(
                native.execute(SkillExecutionRequest(command="sleep 1; echo survived"))
            )
            await _wait_for_file(native, pid_file)
            doomed.cancel()
            with pytest.raises(asyncio.CancelledError):
                await doomed
            return (await survivor).stdout

        assert runtime.call(scenario()) == "survived\n"
        self._assert_tree_dead_and_usable(conformance, runtime, pid_file)
