"""The Agents SDK's own MCP clients (``MCPServerStdio``, ``MCPServerStreamableHttp``) on
``skillruntime mcp serve``, driven through ``Runner`` by a scripted model: the configuration of
docs/mcp.md, with a full skill turn (skill → bash → read) and an error returned as a result."""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_sdk_runs import EXAMPLE_SKILLS, outputs
from mcp_clients import SKILLRUNTIME, serve_args
from mcp_http import http_server


def _turn() -> ScriptedModel:
    return ScriptedModel(
        [
            [function_call("skill", {"command": "text-stats"}, call_id="s")],
            [function_call("bash", {"command": "echo alpha > note.txt && pwd"}, call_id="b")],
            [function_call("read", {"file_path": "note.txt"}, call_id="r")],
            [function_call("read", {"file_path": "missing.txt"}, call_id="m")],
            [assistant_message("done")],
        ]
    )


async def _run(server: MCPServer) -> tuple[list[str], ScriptedModel]:
    model = _turn()
    async with server:
        agent = Agent(
            name="skills", instructions="Use the skills.", model=model, mcp_servers=[server]
        )
        result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "done"
    model.assert_complete()
    return outputs(result), model


def _check(texts: list[str], model: ScriptedModel, workspace: Path) -> None:
    activated, ran, read, missing = texts
    assert "text-stats" in activated
    assert str(workspace) in ran
    assert "alpha" in read
    assert "Error" in missing
    names = {tool.name for tool in model.calls[0].tools}
    assert {"skill", "bash", "read", "write", "edit", "ls", "glob", "grep"} <= names
    assert (workspace / "note.txt").read_text() == "alpha\n"


def test_mcp_server_stdio_runs_a_skill_turn(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations"
    args = serve_args(
        EXAMPLE_SKILLS, options=[f"conversations_root={conversations}"], conversation="oa-stdio"
    )
    server = MCPServerStdio(
        params={"command": SKILLRUNTIME, "args": args, "env": dict(os.environ)},
        cache_tools_list=False,
        client_session_timeout_seconds=60,
    )
    texts, model = asyncio.run(_run(server))
    _check(texts, model, conversations / "oa-stdio")


def test_mcp_server_streamable_http_runs_a_skill_turn(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations"
    token = secrets.token_urlsafe(16)
    args = serve_args(EXAMPLE_SKILLS, options=[f"conversations_root={conversations}"])
    with http_server(args, env={"SKILLRUNTIME_MCP_TOKEN": token}) as running:
        headers: dict[str, Any] = {
            "Authorization": f"Bearer {token}",
            "X-Skillruntime-Conversation": "oa-http",
        }
        server = MCPServerStreamableHttp(
            params={"url": running.url, "headers": headers},
            cache_tools_list=False,
            client_session_timeout_seconds=60,
        )
        texts, model = asyncio.run(_run(server))
    _check(texts, model, conversations / "oa-http")
