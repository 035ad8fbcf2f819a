"""The HTTP server in process: ended sessions leave no per-session object behind, and the
allocators' free memory is released once the last session has ended (docs/mcp.md "Memory")."""

from __future__ import annotations

import asyncio
import gc
import platform
from pathlib import Path

import pytest

from mcp_clients import call_ok
from mcp_http import http_session
from skillruntime.core.skills import discover_skills
from skillruntime.mcp import ServeConfig, http, memory
from skillruntime.mcp.conversations import ServedConversation
from skillruntime.mcp.http import HttpConversations, serve_http
from skillruntime.mcp.sessions import SessionManager

SESSIONS = 6


def _alive(kind: type) -> list[object]:
    gc.collect()
    return [item for item in gc.get_objects() if isinstance(item, kind)]


@pytest.mark.slow
def test_ended_sessions_leave_nothing_behind_and_the_last_one_releases_memory(
    skills_root: Path, conversations_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_at_release: list[int] = []

    async def scenario() -> None:
        released = asyncio.Event()

        def release() -> bool:
            (manager,) = _alive(SessionManager)
            assert isinstance(manager, SessionManager)
            open_at_release.append(manager.session_count)
            released.set()
            return memory.release_free_memory()

        monkeypatch.setattr(http, "release_free_memory", release)
        config = ServeConfig(
            "local",
            {"conversations_root": str(conversations_root)},
            skills=tuple(discover_skills(skills_root)),
        )
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        server = asyncio.ensure_future(
            serve_http(config, port=0, stop=stop, on_ready=ready.set_result)
        )
        try:
            url = await asyncio.wait_for(ready, 30)
            # every session is open before any ends: the server is idle only after the last
            barrier = asyncio.Barrier(SESSIONS)

            async def one() -> None:
                async with http_session(url) as (session, _):
                    await call_ok(session, "write", {"file_path": "a.txt", "content": "a"})
                    await barrier.wait()

            await asyncio.gather(*(one() for _ in range(SESSIONS)))
            await asyncio.wait_for(released.wait(), 30)
            assert open_at_release == [0]
            assert _alive(ServedConversation) == []
            (conversations,) = _alive(HttpConversations)
            assert isinstance(conversations, HttpConversations)
            assert conversations._opening == {}
            (manager,) = _alive(SessionManager)
            assert isinstance(manager, SessionManager)
            assert manager._server_instances == {}
            assert manager._session_owners == {}
            assert manager._in_flight == {}
            assert manager._last_used == {}
            assert list(conversations_root.iterdir()) == []  # generated ones are discarded
        finally:
            stop.set()
            await asyncio.wait_for(server, 30)

    asyncio.run(scenario())


def test_release_free_memory_runs_malloc_trim_on_glibc() -> None:
    assert memory.release_free_memory() is (platform.libc_ver()[0] == "glibc")
