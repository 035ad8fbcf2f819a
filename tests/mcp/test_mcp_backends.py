"""The scripted MCP turn against the OpenSandbox double and the AIO double (stdio server).

OpenSandbox: the conversation's sandbox outlives the server process and a second process
resumes it through a SQLite conversation store; two HTTP server processes share a named
conversation the same way; ending the conversation leaves no sandbox.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import ClientSession

from doubles.aio import AioDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY, OpenSandboxDouble
from mcp_clients import call_ok, scripted_turn, serve_args, stdio_session
from mcp_http import http_server, http_session
from skillruntime.opensandbox import OpenSandboxSkillRuntime

opensandbox_double = opensandbox_double_fixture(scope="module", tail_delay=SCALED_TAIL_DELAY)


@pytest.fixture(scope="module")
def aio_double() -> Iterator[AioDouble]:
    with AioDouble() as double:
        yield double


def _env(**values: str) -> dict[str, str]:
    return {**os.environ, **values}


def test_the_turn_on_opensandbox_keeps_one_resumable_sandbox_and_leaks_none(
    skills_root: Path, tmp_path: Path, opensandbox_double: OpenSandboxDouble
) -> None:
    store = f"sqlite:///{tmp_path / 'conversations.db'}"
    conversation = "mcp-os-1"
    args = serve_args(
        skills_root,
        runtime="opensandbox",
        options=[f"domain={opensandbox_double.domain}", f"conversation_store={store}"],
        conversation=conversation,
    )
    env = _env(SKILLRUNTIME_OPENSANDBOX_API_KEY=opensandbox_double.api_key)
    before = {sandbox["id"] for sandbox in opensandbox_double.sandboxes()}

    async def first_turn() -> None:
        async with stdio_session(args, env) as (session, _):
            await scripted_turn(session)

    async def resumed_turn() -> str:
        async with stdio_session(args, env) as (session, _):
            return await call_ok(session, "read", {"file_path": "notes/report.txt"})

    try:
        asyncio.run(first_turn())
        created = [s for s in opensandbox_double.sandboxes() if s["id"] not in before]
        assert len(created) == 1  # the conversation's sandbox, kept after the server closed
        workspace = opensandbox_double.workspace_of(created[0]["id"])
        report = workspace / "conversations" / conversation / "notes" / "report.txt"
        assert report.read_text() == "alpha\ngamma\n"

        assert "gamma" in asyncio.run(resumed_turn())
        after = [s["id"] for s in opensandbox_double.sandboxes() if s["id"] not in before]
        assert after == [created[0]["id"]]  # resumed, no second sandbox
    finally:
        with OpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        ) as runtime:
            runtime.destroy_conversation_sandbox()
    assert {sandbox["id"] for sandbox in opensandbox_double.sandboxes()} == before


def test_the_turn_on_aio(skills_root: Path, aio_double: AioDouble) -> None:
    conversation = "mcp-aio-1"
    args = serve_args(
        skills_root,
        runtime="aio",
        options=[f"base_url={aio_double.url}"],
        conversation=conversation,
    )
    env = _env(SKILLRUNTIME_AIO_TOKEN=aio_double.token or "")

    async def turn() -> str:
        async with stdio_session(args, env) as (session, _):
            base = await scripted_turn(session)
            assert await call_ok(session, "bash", {"command": "pwd"}) == (
                f"/home/gem/workspace/conversations/{conversation}"
            )
            return base

    base = asyncio.run(turn())
    assert base.startswith(f"/home/gem/workspace/conversations/{conversation}/skills/")
    report = aio_double.host_path(
        f"/home/gem/workspace/conversations/{conversation}/notes/report.txt"
    )
    assert report.read_text() == "alpha\ngamma\n"


def test_two_http_servers_resume_each_others_named_conversation(
    skills_root: Path, tmp_path: Path, opensandbox_double: OpenSandboxDouble
) -> None:
    store = f"sqlite:///{tmp_path / 'conversations.db'}"
    conversation = "mcp-os-http"
    args = serve_args(
        skills_root,
        runtime="opensandbox",
        options=[f"domain={opensandbox_double.domain}", f"conversation_store={store}"],
    )
    env = {"SKILLRUNTIME_OPENSANDBOX_API_KEY": opensandbox_double.api_key}
    headers = {"X-Skillruntime-Conversation": conversation}
    before = {sandbox["id"] for sandbox in opensandbox_double.sandboxes()}

    async def write(url: str) -> None:
        async with http_session(url, headers) as (session, _):
            await call_ok(session, "skill", {"command": "text-stats"})
            await call_ok(session, "write", {"file_path": "from-a.txt", "content": "node a\n"})

    async def read(url: str) -> str:
        async with http_session(url, headers) as (session, _):
            return await call_ok(session, "read", {"file_path": "from-a.txt"})

    try:
        with http_server(args, env) as node_a, http_server(args, env) as node_b:
            asyncio.run(write(node_a.url))
            assert "node a" in asyncio.run(read(node_b.url))
            created = [s for s in opensandbox_double.sandboxes() if s["id"] not in before]
            assert len(created) == 1  # both processes use the conversation's one sandbox
    finally:
        with OpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        ) as runtime:
            runtime.destroy_conversation_sandbox()
    assert {sandbox["id"] for sandbox in opensandbox_double.sandboxes()} == before


def test_generated_conversations_on_opensandbox_leave_no_sandbox(
    skills_root: Path, tmp_path: Path, opensandbox_double: OpenSandboxDouble
) -> None:
    store = f"sqlite:///{tmp_path / 'conversations.db'}"
    args = serve_args(
        skills_root,
        runtime="opensandbox",
        options=[f"domain={opensandbox_double.domain}", f"conversation_store={store}"],
    )
    env = _env(SKILLRUNTIME_OPENSANDBOX_API_KEY=opensandbox_double.api_key)
    before = {sandbox["id"] for sandbox in opensandbox_double.sandboxes()}

    async def turn(session: ClientSession) -> None:
        await call_ok(session, "skill", {"command": "text-stats"})
        await call_ok(session, "write", {"file_path": "a.txt", "content": "a\n"})
        created = [s for s in opensandbox_double.sandboxes() if s["id"] not in before]
        assert len(created) == 1

    async def over_stdio() -> None:
        async with stdio_session(args, env) as (session, _):  # no --conversation
            await turn(session)

    async def over_http(url: str) -> None:
        async with http_session(url) as (session, _):  # a session of its own, ended on exit
            await turn(session)

    asyncio.run(over_stdio())
    assert {sandbox["id"] for sandbox in opensandbox_double.sandboxes()} == before
    with http_server(args, {"SKILLRUNTIME_OPENSANDBOX_API_KEY": opensandbox_double.api_key}) as s:
        asyncio.run(over_http(s.url))
        # the client's DELETE is answered before the session's conversation is discarded
        deadline = time.monotonic() + 30
        while {sandbox["id"] for sandbox in opensandbox_double.sandboxes()} != before:
            assert time.monotonic() < deadline, "the ended session's sandbox was kept"
            time.sleep(0.1)
