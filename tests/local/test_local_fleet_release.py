"""Many open local conversations in one process (the small, fast version of ``bench_fleet``):
an idle open conversation holds no thread and no file descriptor, and ``close()`` releases
everything."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from pathlib import Path

import pytest

from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.tools import AsyncSkillTools, SkillTools
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"
TRUE = SkillExecutionRequest(command="true")
POOLS = ("skillruntime-spawn", "skillruntime-bridge")
"""Process-wide pools: bounded by constants, never by the runtimes open."""
COUNT = 8


def held() -> tuple[int, int]:
    """(file descriptors, threads outside the process-wide pools) of this process."""
    gc.collect()
    fds = len(os.listdir("/proc/self/fd")) - 1
    threads = sum(not thread.name.startswith(POOLS) for thread in threading.enumerate())
    return fds, threads


@pytest.mark.slow
def test_open_sync_conversations_hold_nothing_and_close_releases_all(tmp_path: Path) -> None:
    before = held()
    opened: list[tuple[LocalSkillRuntime, SkillTools]] = []
    try:
        for index in range(COUNT):
            runtime = LocalSkillRuntime(conversation_id=f"c{index}", conversations_root=tmp_path)
            tools = SkillTools(runtime, [SKILLS])
            opened.append((runtime, tools))
            assert "Base directory" in tools.dispatch("skill", {"command": "text-stats"})
            tools.dispatch("write", {"file_path": "notes.txt", "content": "one\n"})
            assert runtime.execute(TRUE).exit_code == 0
            assert "one" in tools.dispatch("read", {"file_path": "notes.txt"})
        assert held() == before
    finally:
        for runtime, tools in opened:
            tools.close()
            runtime.close()
    assert held() == before


@pytest.mark.slow
def test_open_async_conversations_hold_nothing_and_close_releases_all(tmp_path: Path) -> None:
    async def scenario() -> None:
        before = held()
        opened: list[tuple[AsyncLocalSkillRuntime, AsyncSkillTools]] = []
        try:
            for index in range(COUNT):
                runtime = AsyncLocalSkillRuntime(
                    conversation_id=f"c{index}", conversations_root=tmp_path
                )
                tools = AsyncSkillTools(runtime, [SKILLS])
                opened.append((runtime, tools))
                loaded = await tools.adispatch("skill", {"command": "text-stats"})
                assert "Base directory" in loaded
                await tools.adispatch("write", {"file_path": "notes.txt", "content": "one\n"})
                assert (await runtime.execute(TRUE)).exit_code == 0
                assert "one" in await tools.adispatch("read", {"file_path": "notes.txt"})
            fds, threads = held()
            assert fds == before[0]
            assert threads <= before[1] + 2  # asyncio's default executor, made once per loop
        finally:
            for runtime, tools in opened:
                tools.close()
                await runtime.close()

    baseline = held()
    asyncio.run(scenario())
    assert held() == baseline
