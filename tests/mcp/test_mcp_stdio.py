"""``skillruntime mcp serve`` over stdio, driven by the MCP SDK's own client (server subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from mcp_clients import (
    SKILLRUNTIME,
    call_ok,
    scripted_turn,
    serve_args,
    server_env,
    stdio_session,
    text_of,
)
from skillruntime.core.skills import discover_skills
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime

ALL_TOOLS = ["skill", "bash", "read", "write", "edit", "ls", "glob", "grep"]


def local_args(skills_root: Path, conversations_root: Path, conversation: str = "c1") -> list[str]:
    return serve_args(
        skills_root, options=[f"conversations_root={conversations_root}"], conversation=conversation
    )


def test_initialize_announces_tools_and_resources_with_list_changed(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario() -> None:
        async with stdio_session(local_args(skills_root, conversations_root)) as (session, _):
            result = session.initialize_result
            assert result is not None
            assert result.server_info.name == "skillruntime"
            assert result.capabilities.tools is not None
            assert result.capabilities.tools.list_changed is True
            assert result.capabilities.resources is not None
            assert result.capabilities.resources.list_changed is True

    asyncio.run(scenario())


def test_tools_are_the_skill_tools_with_their_schemas_and_descriptions(
    skills_root: Path, conversations_root: Path, tmp_path: Path
) -> None:
    with LocalSkillRuntime(work_root=tmp_path / "direct") as runtime:
        expected = {
            tool.name: (tool.description, tool.parameters)
            for tool in SkillTools(runtime, discover_skills(skills_root)).tools
        }

    async def scenario() -> None:
        async with stdio_session(local_args(skills_root, conversations_root)) as (session, _):
            listed = (await session.list_tools()).tools
            assert [tool.name for tool in listed] == ALL_TOOLS
            for tool in listed:
                assert (tool.description, tool.input_schema) == expected[tool.name]

    asyncio.run(scenario())


def test_a_scripted_turn_runs_in_the_conversation_workspace(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario() -> None:
        args = local_args(skills_root, conversations_root, conversation="turn-1")
        async with stdio_session(args) as (session, _):
            base = await scripted_turn(session)
            workspace = conversations_root / "turn-1"
            assert Path(base).is_relative_to(workspace / "skills")
            assert (workspace / "notes" / "report.txt").read_text() == "alpha\ngamma\n"

    asyncio.run(scenario())


def test_activating_a_restricting_skill_sends_list_changed_and_narrows_the_tools(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario() -> None:
        async with stdio_session(local_args(skills_root, conversations_root)) as (session, seen):
            await call_ok(session, "bash", {"command": "echo before"})
            assert "notifications/tools/list_changed" not in seen.methods()
            await call_ok(session, "skill", {"command": "notes-only"})
            await session.send_ping()  # the notification precedes the ping's answer
            assert "notifications/tools/list_changed" in seen.methods()
            listed = [tool.name for tool in (await session.list_tools()).tools]
            assert listed == ["skill", "bash", "read", "grep"]
            refused = await session.call_tool("write", {"file_path": "x", "content": "y"})
            assert refused.is_error is True
            assert text_of(refused).startswith("Error:")
            assert not (conversations_root / "c1" / "x").exists()
            compound = await session.call_tool("bash", {"command": "echo a; rm -rf ."})
            assert compound.is_error is True
            assert await call_ok(session, "bash", {"command": "echo allowed"}) == "allowed"

    asyncio.run(scenario())


def test_refused_invalid_and_failing_calls_are_error_results_not_protocol_errors(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario() -> None:
        async with stdio_session(local_args(skills_root, conversations_root)) as (session, _):
            unknown = await session.call_tool("no-such-tool", {})
            assert unknown.is_error is True
            assert "Unknown tool" in text_of(unknown)
            invalid = await session.call_tool("bash", {})
            assert invalid.is_error is True
            assert "command" in text_of(invalid)
            missing = await session.call_tool("read", {"file_path": "nowhere.txt"})
            assert missing.is_error is True
            escape = await session.call_tool("read", {"file_path": "../../../etc/hostname"})
            assert escape.is_error is True
            no_skill = await session.call_tool("skill", {"command": "no-such-skill"})
            assert no_skill.is_error is True
            failed = await session.call_tool("bash", {"command": "echo out; exit 3"})
            assert failed.is_error is False  # a non-zero exit is the command's result
            assert text_of(failed) == "out\nExit code: 3"
            assert await call_ok(session, "bash", {"command": "echo still"}) == "still"

    asyncio.run(scenario())


def test_resources_list_skill_files_and_read_them_from_the_runtime(
    skills_root: Path, conversations_root: Path
) -> None:
    async def uris(session: ClientSession) -> list[str]:
        return [resource.uri for resource in (await session.list_resources()).resources]

    async def scenario() -> None:
        async with stdio_session(local_args(skills_root, conversations_root)) as (session, seen):
            assert await uris(session) == [
                "skill://csv-report/SKILL.md",
                "skill://notes-only/SKILL.md",
                "skill://text-stats/SKILL.md",
            ]
            read = await session.read_resource("skill://text-stats/SKILL.md")
            assert read.contents[0].text == (skills_root / "text-stats" / "SKILL.md").read_text()
            with pytest.raises(MCPError, match="not prepared"):
                await session.read_resource("skill://text-stats/scripts/run.sh")
            with pytest.raises(MCPError):
                await session.read_resource("skill://text-stats/../../../etc/hostname")
            with pytest.raises(MCPError):
                await session.read_resource("skill://unknown/SKILL.md")

            await call_ok(session, "skill", {"command": "text-stats"})
            await session.send_ping()
            assert "notifications/resources/list_changed" in seen.methods()
            listed = await uris(session)
            assert "skill://text-stats/scripts/run.sh" in listed
            # written by the skill's bootstrap inside the runtime, absent from the host copy
            assert "skill://text-stats/build/stopwords.txt" in listed
            assert not (skills_root / "text-stats" / "build").exists()
            script = await session.read_resource("skill://text-stats/scripts/run.sh")
            host = (skills_root / "text-stats" / "scripts" / "run.sh").read_text()
            assert script.contents[0].text == host
            assert "skill://csv-report/scripts/report.py" not in listed

    asyncio.run(scenario())


def test_closing_stdin_ends_the_server_process(skills_root: Path, conversations_root: Path) -> None:
    async def scenario() -> int:
        async with stdio_session(local_args(skills_root, conversations_root)) as (session, _):
            return int(await call_ok(session, "bash", {"command": "echo $PPID"}))

    server_pid = asyncio.run(scenario())
    assert not Path(f"/proc/{server_pid}").exists()


def _send(process: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_runtime_and_kills_running_commands(
    skills_root: Path, conversations_root: Path, signum: signal.Signals
) -> None:
    process = subprocess.Popen(
        [SKILLRUNTIME, *local_args(skills_root, conversations_root, conversation="sig")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["id"] == 1
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        command = "echo $$ > sleeper.pid; exec sleep 300"
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": command}},
            },
        )
        pid_file = conversations_root / "sig" / "sleeper.pid"
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        sleeper = int(pid_file.read_text())
        process.send_signal(signum)
        assert process.wait(timeout=30) == 0
        assert not Path(f"/proc/{sleeper}").exists()
        for line in process.stdout.read().splitlines():  # stdout carries protocol messages only
            assert json.loads(line)["jsonrpc"] == "2.0"
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert "conversation sig" in stderr
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def test_a_2026_era_client_gets_tool_changes_on_its_listen_stream(
    skills_root: Path, conversations_root: Path
) -> None:
    parameters = StdioServerParameters(
        command=SKILLRUNTIME, args=local_args(skills_root, conversations_root), env=server_env()
    )

    async def scenario() -> None:
        async with Client(parameters, mode="auto") as client:
            assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
            async with client.listen(tools_list_changed=True) as subscription:
                loaded = await client.call_tool("skill", {"command": "notes-only"})
                assert loaded.is_error is False
                async with asyncio.timeout(30):
                    event = await anext(aiter(subscription))
                assert isinstance(event, ToolsListChanged)
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["skill", "bash", "read", "grep"]
            refused = await client.call_tool("write", {"file_path": "x", "content": "y"})
            assert refused.is_error is True

    asyncio.run(scenario())
