"""The MCP server runs a skill's declared bootstrap when its ``skill`` tool prepares it.

The server runs in-process (the SDK's client on :class:`SkillMcpServer`) over a
:class:`ServeConfig` without ``configs``, built by hand as a library user does and by
``skillruntime mcp serve``'s :func:`load_config`; the scripted turn runs the ``text-stats``
example, whose script exits with code 3 unless the bootstrap ran.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.server.context import ServerRequestContext

from mcp_clients import scripted_turn
from skillruntime.core.skills import discover_skills
from skillruntime.mcp.cli import load_config
from skillruntime.mcp.conversations import ServeConfig, ServedConversation
from skillruntime.mcp.server import SkillMcpServer


async def _turn_in_process(config: ServeConfig, conversation_id: str) -> str:
    """The scripted turn against an in-process server of ``config``; the prepared base path."""
    conversation = await ServedConversation.open(config, conversation_id)

    async def resolve(ctx: ServerRequestContext[Any, Any]) -> ServedConversation:
        return conversation

    server = SkillMcpServer(config, resolve)
    try:
        async with Client(server.server, mode="legacy") as client:
            return await scripted_turn(client.session)
    finally:
        await conversation.aclose()


def test_a_served_config_without_configs_bootstraps_the_skill(
    skills_root: Path, conversations_root: Path
) -> None:
    config = ServeConfig(
        "local",
        {"conversations_root": str(conversations_root)},
        tuple(discover_skills(skills_root, skip_invalid=True)),
    )
    assert dict(config.configs) == {}
    base = asyncio.run(_turn_in_process(config, "mcp-declared"))
    assert (Path(base) / "build" / "stopwords.txt").is_file()
    assert not (skills_root / "text-stats" / "build").exists()


def test_the_serve_command_config_leaves_the_bootstrap_to_the_runtime(
    skills_root: Path, conversations_root: Path
) -> None:
    config = load_config("local", [f"conversations_root={conversations_root}"], skills_root, [])
    assert dict(config.configs) == {}  # no per-entry-point copy of the declared commands
    base = asyncio.run(_turn_in_process(config, "mcp-serve-config"))
    assert (Path(base) / "build" / "stopwords.txt").is_file()
