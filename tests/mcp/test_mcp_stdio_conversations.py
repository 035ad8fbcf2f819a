"""Conversations across stdio server processes: a resumed conversation's prepared skills are
resources at once; a generated conversation leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from mcp_clients import SKILLRUNTIME, call_ok, serve_args, stdio_session


def test_a_later_server_on_the_conversation_serves_the_prepared_skill_files(
    skills_root: Path, conversations_root: Path
) -> None:
    args = serve_args(
        skills_root, options=[f"conversations_root={conversations_root}"], conversation="resume-1"
    )

    async def prepare() -> None:
        async with stdio_session(args) as (session, _):
            await call_ok(session, "skill", {"command": "text-stats"})

    async def resume() -> None:
        async with stdio_session(args) as (session, _):  # no skill call in this process
            listed = [resource.uri for resource in (await session.list_resources()).resources]
            assert "skill://text-stats/scripts/run.sh" in listed
            assert "skill://text-stats/build/stopwords.txt" in listed  # made by the bootstrap
            assert "skill://csv-report/scripts/report.py" not in listed  # never prepared
            script = await session.read_resource("skill://text-stats/scripts/run.sh")
            host = (skills_root / "text-stats" / "scripts" / "run.sh").read_text()
            assert script.contents[0].text == host  # type: ignore[union-attr]

    asyncio.run(prepare())
    asyncio.run(resume())


def _workspaces(home: Path) -> list[Path]:
    root = home / ".skillruntime" / "conversations"
    return sorted(root.iterdir()) if root.exists() else []


def test_a_generated_conversation_is_discarded_when_the_server_exits(
    skills_root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    args = serve_args(skills_root)  # the documented client configuration: no conversation

    async def turn() -> None:
        async with stdio_session(args, env=env) as (session, _):
            await call_ok(session, "skill", {"command": "text-stats"})
            await call_ok(session, "write", {"file_path": "notes/a.txt", "content": "a\n"})
            (workspace,) = _workspaces(home)
            assert workspace.name.startswith("mcp-")
            assert (workspace / "notes" / "a.txt").exists()

    for _ in range(3):
        asyncio.run(turn())
    assert _workspaces(home) == []


def _send(process: subprocess.Popen[bytes], message: dict[str, object]) -> dict[str, object]:
    """Write one JSON-RPC message; the answer when it is a request."""
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    if "id" not in message:
        return {}
    answer: dict[str, object] = json.loads(process.stdout.readline())
    assert answer["id"] == message["id"]
    return answer


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_generated_conversation_is_discarded_on_a_signal(
    skills_root: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    process = subprocess.Popen(
        [SKILLRUNTIME, *serve_args(skills_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},
    )
    try:
        assert process.stderr is not None
        assert "discarded on exit" in process.stderr.readline().decode()
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
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        arguments = {"file_path": "a.txt", "content": "a\n"}
        written = _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "write", "arguments": arguments},
            },
        )
        assert written["result"]["isError"] is False  # type: ignore[index]
        (workspace,) = _workspaces(home)
        assert (workspace / "a.txt").exists()
        process.send_signal(signum)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert _workspaces(home) == []
