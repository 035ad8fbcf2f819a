"""``HttpConversations`` in process: one conversation per session key, idle sessions closed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from skillruntime.core.errors import RuntimeClosedError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.mcp import ServeConfig
from skillruntime.mcp.http import HttpConversations


def _ctx(**headers: str) -> Any:
    return SimpleNamespace(request=SimpleNamespace(headers=headers))


def _config(root: Path) -> ServeConfig:
    return ServeConfig("local", {"conversations_root": str(root)})


def test_concurrent_first_requests_of_a_session_open_one_conversation(
    conversations_root: Path,
) -> None:
    async def scenario() -> None:
        conversations = HttpConversations(_config(conversations_root))
        try:
            opened = await asyncio.gather(
                *(conversations.resolve(_ctx(**{"mcp-session-id": "s1"})) for _ in range(10))
            )
            assert len({id(conversation) for conversation in opened}) == 1
            other = await conversations.resolve(_ctx(**{"mcp-session-id": "s2"}))
            assert other is not opened[0]
            assert other.conversation_id != opened[0].conversation_id
        finally:
            await conversations.aclose()
        assert [path.name for path in conversations_root.iterdir()] == []  # nothing executed

    asyncio.run(scenario())


def test_an_idle_session_conversation_is_closed_and_a_named_one_kept(
    conversations_root: Path,
) -> None:
    async def scenario() -> None:
        conversations = HttpConversations(_config(conversations_root), session_idle_timeout=0.05)
        try:
            idle = await conversations.resolve(_ctx(**{"mcp-session-id": "old"}))
            named = await conversations.resolve(_ctx(**{"x-skillruntime-conversation": "kept"}))
            await asyncio.sleep(0.2)
            await conversations.resolve(_ctx(**{"mcp-session-id": "new"}))
            with pytest.raises(RuntimeClosedError):
                await idle.runtime.execute(SkillExecutionRequest(command="true"))
            pwd = await named.runtime.execute(SkillExecutionRequest(command="pwd"))
            assert pwd.stdout == f"{conversations_root / 'kept'}\n"
            fresh = await conversations.resolve(_ctx(**{"mcp-session-id": "old"}))
            assert fresh is not idle
        finally:
            await conversations.aclose()
        with pytest.raises(RuntimeClosedError):
            await named.runtime.execute(SkillExecutionRequest(command="true"))

    asyncio.run(scenario())


def test_a_request_without_session_or_name_is_refused(conversations_root: Path) -> None:
    async def scenario() -> None:
        conversations = HttpConversations(_config(conversations_root))
        with pytest.raises(MCPError, match="X-Skillruntime-Conversation"):
            await conversations.resolve(_ctx())

    asyncio.run(scenario())
