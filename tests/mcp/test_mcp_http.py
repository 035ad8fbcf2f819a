"""``skillruntime mcp serve --transport http`` driven by the MCP SDK's streamable HTTP client."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx2

from mcp_clients import call_ok, scripted_turn, serve_args
from mcp_http import http_server, http_session

TOKEN = "s3cret-token-for-tests"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def local_args(skills_root: Path, conversations_root: Path) -> list[str]:
    return serve_args(skills_root, options=[f"conversations_root={conversations_root}"])


def test_a_scripted_turn_over_http_and_list_changed(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario(url: str) -> None:
        async with http_session(url) as (session, seen):
            result = session.initialize_result
            assert result is not None
            assert result.capabilities.tools is not None
            assert result.capabilities.tools.list_changed is True
            assert result.capabilities.resources is not None
            assert result.capabilities.resources.list_changed is True
            base = await scripted_turn(session)
            assert Path(base).is_relative_to(conversations_root)
            await call_ok(session, "skill", {"command": "notes-only"})
            listed = [tool.name for tool in (await session.list_tools()).tools]
            assert listed == ["skill", "bash", "read", "grep"]
            assert "notifications/tools/list_changed" in seen.methods()
            refused = await session.call_tool("write", {"file_path": "x", "content": "y"})
            assert refused.is_error is True
            # The session's (generated) conversation holds the turn's file while it lasts...
            workspaces = [path for path in conversations_root.iterdir() if path.is_dir()]
            assert len(workspaces) == 1
            assert (workspaces[0] / "notes" / "report.txt").read_text() == "alpha\ngamma\n"

    with http_server(local_args(skills_root, conversations_root)) as server:
        asyncio.run(scenario(server.url))
        # ... and is discarded once the session ended (the client's DELETE), not left behind.
        deadline = time.monotonic() + 30
        while any(path.is_dir() for path in conversations_root.iterdir()):
            assert time.monotonic() < deadline, list(conversations_root.iterdir())
            time.sleep(0.05)
    assert server.process.returncode == 0


def test_two_concurrent_sessions_have_separate_conversations(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario(url: str) -> None:
        async with http_session(url) as (first, _), http_session(url) as (second, _):
            first_dir, second_dir = await asyncio.gather(
                call_ok(first, "bash", {"command": "pwd"}),
                call_ok(second, "bash", {"command": "pwd"}),
            )
            assert first_dir != second_dir
            await call_ok(first, "write", {"file_path": "mine.txt", "content": "first\n"})
            missing = await second.call_tool("read", {"file_path": "mine.txt"})
            assert missing.is_error is True
            await call_ok(first, "skill", {"command": "notes-only"})
            assert len((await first.list_tools()).tools) == 4
            assert len((await second.list_tools()).tools) == 8
            assert Path(first_dir, "mine.txt").read_text() == "first\n"
            assert not Path(second_dir, "mine.txt").exists()

    with http_server(local_args(skills_root, conversations_root)) as server:
        asyncio.run(scenario(server.url))


def test_sessions_naming_one_conversation_share_it(
    skills_root: Path, conversations_root: Path
) -> None:
    headers = {"X-Skillruntime-Conversation": "shared-7"}

    async def scenario(url: str) -> None:
        async with http_session(url, headers) as (first, _):
            await call_ok(first, "write", {"file_path": "note.txt", "content": "kept\n"})
        async with http_session(url, headers) as (second, _):
            assert "kept" in await call_ok(second, "read", {"file_path": "note.txt"})
            assert await call_ok(second, "bash", {"command": "pwd"}) == str(
                conversations_root / "shared-7"
            )

    with http_server(local_args(skills_root, conversations_root)) as server:
        asyncio.run(scenario(server.url))


def test_the_token_is_required_on_every_request(
    skills_root: Path, conversations_root: Path
) -> None:
    env = {"SKILLRUNTIME_MCP_TOKEN": TOKEN}
    with http_server(local_args(skills_root, conversations_root), env) as server:
        with httpx2.Client(timeout=30) as client:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                refused = client.post(
                    server.url, headers={**MCP_HEADERS, **headers}, content=json.dumps(INITIALIZE)
                )
                assert refused.status_code == 401
                assert refused.headers["WWW-Authenticate"].startswith("Bearer")
                assert TOKEN not in refused.text
            accepted = client.post(
                server.url,
                headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"},
                content=json.dumps(INITIALIZE),
            )
            assert accepted.status_code == 200
            session_id = accepted.headers["mcp-session-id"]
            # a later request of the accepted session without the token is refused too
            later = client.post(
                server.url,
                headers={**MCP_HEADERS, "mcp-session-id": session_id},
                content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            )
            assert later.status_code == 401

        async def scenario() -> None:
            async with http_session(server.url, {"Authorization": f"Bearer {TOKEN}"}) as (s, _):
                assert await call_ok(s, "bash", {"command": "echo in"}) == "in"

        asyncio.run(scenario())
    stderr = server.process.stderr.read().decode() if server.process.stderr else ""
    assert TOKEN not in stderr


def test_foreign_origins_and_oversized_bodies_are_refused(
    skills_root: Path, conversations_root: Path
) -> None:
    args = [*local_args(skills_root, conversations_root), "--max-body-bytes", "4096"]
    with http_server(args) as server, httpx2.Client(timeout=30) as client:
        body = json.dumps(INITIALIZE)
        foreign = client.post(
            server.url, headers={**MCP_HEADERS, "Origin": "http://evil.example"}, content=body
        )
        assert foreign.status_code == 403
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        local = client.post(
            server.url, headers={**MCP_HEADERS, "Origin": f"http://localhost:{port}"}, content=body
        )
        assert local.status_code == 200
        rebound = client.post(
            server.url, headers={**MCP_HEADERS, "Host": f"evil.example:{port}"}, content=body
        )
        assert rebound.status_code in (400, 403, 421)
        padded = dict(INITIALIZE, padding="x" * 8192)
        oversized = client.post(server.url, headers=MCP_HEADERS, content=json.dumps(padded))
        assert oversized.status_code == 413
