"""Several open Docker conversations in one process (the small, fast version of ``bench_fleet``):
open async conversations hold no thread of their own, and after ``close()`` (and
``destroy_conversation()``) no thread, file descriptor, container or volume is left."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from pathlib import Path

import pytest

import docker_fixtures
from docker_fixtures import IMAGE, labelled, suite_labels
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.tools import AsyncSkillTools, SkillTools
from skillruntime.docker import AsyncDockerSkillRuntime, DockerSkillRuntime

SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"
TRUE = SkillExecutionRequest(command="true")
POOLS = ("skillruntime-spawn", "skillruntime-bridge")
COUNT = 6

docker_run = docker_fixtures.docker_run


def held() -> tuple[int, int]:
    """(file descriptors, threads outside the process-wide pools) of this process."""
    gc.collect()
    fds = len(os.listdir("/proc/self/fd")) - 1
    threads = sum(not thread.name.startswith(POOLS) for thread in threading.enumerate())
    return fds, threads


def bridge_threads() -> int:
    return sum(thread.name.startswith("skillruntime-bridge") for thread in threading.enumerate())


@pytest.mark.slow
def test_open_conversations_are_released_by_close_and_destroy(docker_run: str) -> None:
    # Settings no other test of this process uses: the runtimes of this test share one engine
    # client of their own, released with the last of them.
    options = {"image": IMAGE, "labels": suite_labels(docker_run), "request_timeout_seconds": 61.5}
    before = held()
    opened: list[tuple[DockerSkillRuntime, SkillTools]] = []
    try:
        for index in range(COUNT):
            runtime = DockerSkillRuntime(conversation_id=f"{docker_run}-{index}", **options)
            tools = SkillTools(runtime, [SKILLS])
            opened.append((runtime, tools))
            assert "Base directory" in tools.dispatch("skill", {"command": "text-stats"})
            assert runtime.execute(TRUE).exit_code == 0
    finally:
        for runtime, tools in opened:
            tools.close()
            runtime.close()
    assert held() == before
    assert len(labelled(docker_run)[0]) == COUNT  # close() keeps the conversations' containers

    async def resume_and_destroy() -> None:
        threads = bridge_threads()
        resumed: list[tuple[AsyncDockerSkillRuntime, AsyncSkillTools]] = []
        try:
            for index in range(COUNT):
                runtime = AsyncDockerSkillRuntime(
                    conversation_id=f"{docker_run}-{index}", **options
                )
                tools = AsyncSkillTools(runtime, [SKILLS])
                resumed.append((runtime, tools))
                await tools.adispatch("skill", {"command": "text-stats"})
                results = await asyncio.gather(runtime.execute(TRUE), runtime.execute(TRUE))
                assert [result.exit_code for result in results] == [0, 0]
            # the bridge's threads follow the calls running at once, not the runtimes open
            assert bridge_threads() <= threads + 4  # two at once, and a worker not yet idle again
        finally:
            for runtime, tools in resumed:
                tools.close()
                await asyncio.to_thread(runtime.docker_runtime.destroy_conversation)
                await runtime.close()

    asyncio.run(resume_and_destroy())
    assert held() == before
    assert labelled(docker_run) == ([], [])


def test_runtimes_without_an_engine_share_one_client_until_the_last_closes(
    docker_run: str,
) -> None:
    options = {"image": IMAGE, "labels": suite_labels(docker_run), "request_timeout_seconds": 62.5}
    first = DockerSkillRuntime(conversation_id=f"{docker_run}-a", **options)
    second = DockerSkillRuntime(conversation_id=f"{docker_run}-b", **options)
    other = DockerSkillRuntime(
        conversation_id=f"{docker_run}-c", **{**options, "request_timeout_seconds": 63.5}
    )
    try:
        assert first.engine is second.engine, "one client per engine and settings"
        assert other.engine is not first.engine
        assert first.execute(TRUE).exit_code == 0
        assert second.execute(TRUE).exit_code == 0
        first.close()
        assert second.execute(TRUE).exit_code == 0, "the client outlives its first user"
    finally:
        for runtime in (first, second, other):
            runtime.close()
            ender = DockerSkillRuntime(conversation_id=runtime.workspace.conversation_id, **options)
            try:
                ender.destroy_conversation()
            finally:
                ender.close()
    assert not any(labelled(docker_run))
