"""Serving one conversation over stdio.

stdout carries only protocol messages: while serving, the SDK points file descriptor 1 at
stderr (and 0 at the null device), so a stray write from a handler or a child process misses
the wire. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from .conversations import ServeConfig, ServedConversation
from .lifecycle import serve_until
from .server import SkillMcpServer

__all__ = ["serve_stdio"]


async def serve_stdio(
    config: ServeConfig,
    conversation_id: str | None,
    stop: asyncio.Event | None = None,
    *,
    discard_on_close: bool = False,
) -> None:
    """Serve conversation ``conversation_id`` on stdin/stdout until the client closes stdin or
    ``stop`` is set; the conversation's runtime is closed either way (on ``stop`` before the
    server stops, so running commands are killed and their calls end). With
    ``discard_on_close`` the conversation is discarded then (see :class:`ServedConversation`)."""
    conversation = await ServedConversation.open(
        config, conversation_id, discard_on_close=discard_on_close
    )

    async def resolve(ctx: ServerRequestContext[Any, Any]) -> ServedConversation:
        return conversation

    server = SkillMcpServer(config, resolve)

    async def serving() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.server.run(read_stream, write_stream, server.initialization_options())

    await serve_until(serving(), stop, conversation.aclose)
