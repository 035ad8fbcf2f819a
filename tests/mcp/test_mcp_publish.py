"""``publish_file`` over MCP: served with ``--publish-dir``, absent without it, driven by the
MCP SDK's client over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from mcp import ClientSession

from mcp_clients import call_ok, serve_args, stdio_session, text_of
from mcp_http import http_server, http_session

CONTENT = "quarterly numbers\nline two\n"


def _args(skills_root: Path, conversations_root: Path, *extra: str) -> list[str]:
    return [*serve_args(skills_root, options=[f"conversations_root={conversations_root}"]), *extra]


async def _publish_and_check(session: ClientSession, publish_dir: Path) -> str:
    """Write a file in the runtime, publish it and return the URL; the copy is checked."""
    names = [tool.name for tool in (await session.list_tools()).tools]
    assert names[-1] == "publish_file"
    await call_ok(session, "write", {"file_path": "out/report.txt", "content": CONTENT})
    published = await call_ok(
        session, "publish_file", {"file_path": "out/report.txt", "file_name": "q3.txt"}
    )
    assert "File published successfully." in published
    assert "Content type: text/plain" in published
    assert f"Size: {len(CONTENT.encode())} bytes" in published
    match = re.search(r"^URL: (\S+)$", published, re.MULTILINE)
    assert match, published
    copies = list(publish_dir.glob("*/q3.txt"))
    assert len(copies) == 1
    assert copies[0].read_text() == CONTENT
    missing = await session.call_tool("publish_file", {"file_path": "out/none.txt"})
    assert missing.is_error is True
    assert "does not exist" in text_of(missing)
    return match.group(1)


def test_publish_file_over_stdio_copies_the_runtime_file(
    skills_root: Path, conversations_root: Path, tmp_path: Path
) -> None:
    publish_dir = tmp_path / "published"

    async def scenario() -> str:
        args = [
            *_args(skills_root, conversations_root, "--publish-dir", str(publish_dir)),
            "--conversation",
            "pub-1",
        ]
        async with stdio_session(args) as (session, _):
            return await _publish_and_check(session, publish_dir)

    url = asyncio.run(scenario())
    parsed = urlparse(url)
    assert parsed.scheme == "file"
    assert Path(url2pathname(parsed.path)).read_text() == CONTENT


def test_publish_file_over_http_uses_the_base_url(
    skills_root: Path, conversations_root: Path, tmp_path: Path
) -> None:
    publish_dir = tmp_path / "published"
    args = _args(
        skills_root,
        conversations_root,
        "--publish-dir",
        str(publish_dir),
        "--publish-base-url",
        "https://files.example.test/skill-output/",
    )

    async def scenario(server_url: str) -> str:
        async with http_session(server_url) as (session, _):
            return await _publish_and_check(session, publish_dir)

    with http_server(args) as server:
        url = asyncio.run(scenario(server.url))
    token = next(publish_dir.iterdir()).name
    assert url == f"https://files.example.test/skill-output/{token}/q3.txt"
    assert server.process.returncode == 0


def test_without_a_publish_dir_there_is_no_publish_file_tool(
    skills_root: Path, conversations_root: Path
) -> None:
    async def scenario() -> tuple[list[str], bool]:
        async with stdio_session(_args(skills_root, conversations_root)) as (session, _):
            names = [tool.name for tool in (await session.list_tools()).tools]
            result = await session.call_tool("publish_file", {"file_path": "x"})
            return names, bool(result.is_error)

    names, refused = asyncio.run(scenario())
    assert "publish_file" not in names
    assert refused
