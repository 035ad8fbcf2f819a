"""``HttpConversations`` in process: one conversation per session key, ended sessions' conversations
discarded, named ones kept."""

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


def test_an_ended_session_conversation_is_discarded_and_a_named_one_kept(
    conversations_root: Path,
) -> None:
    async def scenario() -> None:
        conversations = HttpConversations(_config(conversations_root))
        try:
            ended = await conversations.resolve(_ctx(**{"mcp-session-id": "old"}))
            named = await conversations.resolve(_ctx(**{"x-skillruntime-conversation": "kept"}))
            await ended.runtime.execute(SkillExecutionRequest(command="echo x > x.txt"))
            assert ended.conversation_id is not None
            assert (conversations_root / ended.conversation_id / "x.txt").exists()
            await conversations.end_session("old")
            await conversations.end_session("old")  # idempotent
            with pytest.raises(RuntimeClosedError):
                await ended.runtime.execute(SkillExecutionRequest(command="true"))
            assert not (conversations_root / ended.conversation_id).exists()
            pwd = await named.runtime.execute(SkillExecutionRequest(command="pwd"))
            assert pwd.stdout == f"{conversations_root / 'kept'}\n"
            fresh = await conversations.resolve(_ctx(**{"mcp-session-id": "old"}))
            assert fresh is not ended
        finally:
            await conversations.aclose()
        with pytest.raises(RuntimeClosedError):
            await named.runtime.execute(SkillExecutionRequest(command="true"))
        assert (conversations_root / "kept").is_dir()  # a named conversation is kept

    asyncio.run(scenario())


def test_a_request_without_session_or_name_is_refused(conversations_root: Path) -> None:
    async def scenario() -> None:
        conversations = HttpConversations(_config(conversations_root))
        with pytest.raises(MCPError, match="X-Skillruntime-Conversation"):
            await conversations.resolve(_ctx())

    asyncio.run(scenario())
