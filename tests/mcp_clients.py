"""MCP clients for the tests: the SDK's client on a ``skillruntime mcp serve`` subprocess, and the
scripted turn every runtime must pass through MCP."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mcp import ClientSession, types
from mcp.client.session import IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client

SKILLRUNTIME = str(Path(sys.executable).with_name("skillruntime"))
"""The ``skillruntime`` command of this environment."""


def server_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server subprocess: this process's (so ``PYTHONPATH`` reaches it and
    the server runs the code under test; the SDK's default passes only a few variables), plus
    ``env``."""
    return {**os.environ, **(env or {})}


@dataclass
class Notifications:
    """The server notifications a client session received, in order."""

    received: list[types.ServerNotification] = field(default_factory=list)

    async def __call__(self, message: IncomingMessage) -> None:
        if not isinstance(message, Exception):
            self.received.append(message)

    def methods(self) -> list[str]:
        return [item.method for item in self.received]


def serve_args(
    skills_root: Path,
    *,
    runtime: str = "local",
    options: Sequence[str] = (),
    conversation: str | None = None,
) -> list[str]:
    """Arguments of ``skillruntime mcp serve`` over stdio."""
    args = ["mcp", "serve", "--runtime", runtime, "--skills", str(skills_root)]
    for option in options:
        args += ["-o", option]
    if conversation is not None:
        args += ["--conversation", conversation]
    return args


@asynccontextmanager
async def stdio_session(
    args: Sequence[str], env: dict[str, str] | None = None
) -> AsyncIterator[tuple[ClientSession, Notifications]]:
    """An initialized SDK client session on ``skillruntime <args>`` run as a subprocess
    (environment: :func:`server_env` of ``env``)."""
    notifications = Notifications()
    parameters = StdioServerParameters(command=SKILLRUNTIME, args=list(args), env=server_env(env))
    async with (
        stdio_client(parameters) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream, message_handler=notifications) as session,
    ):
        await session.initialize()
        yield session, notifications


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result (the server sends one text block)."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def call_ok(session: ClientSession, name: str, arguments: dict[str, object]) -> str:
    """Call tool ``name`` and return its text, asserting it is not an error result."""
    result = await session.call_tool(name, arguments)
    text = text_of(result)
    assert result.is_error is False, text
    return text


async def scripted_turn(session: ClientSession) -> str:
    """skill → bash → write → read → edit → glob → grep with the ``text-stats`` skill.

    Returns the runtime path of the skill's prepared copy. Leaves ``notes/report.txt`` (``alpha``
    then ``gamma``) in the conversation's working directory.
    """
    loaded = await call_ok(session, "skill", {"command": "text-stats"})
    match = re.search(r"^Base directory for this skill: (.+)$", loaded, re.MULTILINE)
    assert match, loaded
    base = match.group(1)
    assert "# Text statistics" in loaded
    stats = await call_ok(
        session, "bash", {"command": f"sh {base}/scripts/run.sh {base}/assets/sample.txt 3"}
    )
    assert "file: sample.txt" in stats
    assert re.search(r"^lines: \d+$", stats, re.MULTILINE), stats
    await call_ok(session, "write", {"file_path": "notes/report.txt", "content": "alpha\nbeta\n"})
    read = await call_ok(session, "read", {"file_path": "notes/report.txt"})
    assert "alpha" in read
    assert "beta" in read
    await call_ok(
        session,
        "edit",
        {"file_path": "notes/report.txt", "old_string": "beta", "new_string": "gamma"},
    )
    found = await call_ok(session, "glob", {"pattern": "*.txt", "path": "notes"})
    assert "report.txt" in found
    grepped = await call_ok(session, "grep", {"pattern": "gam+a", "path": "notes"})
    assert "report.txt" in grepped
    assert "beta" not in await call_ok(session, "read", {"file_path": "notes/report.txt"})
    return base
