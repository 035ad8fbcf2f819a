"""OpenSandbox ``glob``/``grep`` over a tree of many files: one ``POST /command`` through the
in-sandbox wrapper from the sync and the native async runtime, the default walk's answer, and
the default walk when the sandbox lacks the tools."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from doubles.opensandbox import OpenSandboxDouble
from odd_names_search import BASE, GLOB, GREPS, answer, local_answer
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.files.search import (
    GlobQuery,
    GrepQuery,
    async_default_glob,
    async_default_grep,
    default_glob,
    default_grep,
)
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.testing.search_contracts import odd_files, tree_command, write_tree
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

ROOT = "/workspace/conversations"
FILES = 60
"""Enough files for a walk to cost a request per file while the search stays one command; the
default walk is compared over HTTP, request by request, so a larger tree only costs time."""
_NO_TIME_LIMIT = 3600.0


def _tree(scratch: Path) -> list[tuple[Path, str, bool]]:
    uploads = []
    for index in range(FILES):
        local = scratch / f"d{index % 12}" / f"f{index:04d}.txt"
        local.parent.mkdir(exist_ok=True)
        marker = "needle" if index % 7 == 0 else "hay"
        local.write_text(f"line one\n{marker} two\n")
        uploads.append((local, f"tree/{local.relative_to(scratch).as_posix()}", False))
    return uploads


def _requests(double: OpenSandboxDouble) -> int:
    return sum(double.stats()["requests"].values())


def _sync_runtime(double: OpenSandboxDouble) -> OpenSandboxSkillRuntime:
    return OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=f"os-search-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
        conversation_store=InMemoryConversationStore(),
    )


def test_sync_grep_and_glob_are_one_command(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    runtime = _sync_runtime(opensandbox_double)
    try:
        fs = runtime.get_file_system()
        fs.upload_files(_tree(tmp_path))
        root = fs.stat("tree")
        assert root is not None
        query = GrepQuery("needle", time_budget=_NO_TIME_LIMIT)
        before = _requests(opensandbox_double)
        found = fs.grep(root, query)
        grep_requests = _requests(opensandbox_double) - before
        before = _requests(opensandbox_double)
        globbed = fs.glob(root, GlobQuery("d1*/*.txt"))
        glob_requests = _requests(opensandbox_double) - before
        assert grep_requests == 1
        assert glob_requests == 1
        assert len(found.entries) == len(range(0, FILES, 7))
        before = _requests(opensandbox_double)
        assert found == default_grep(fs, root, query)
        assert _requests(opensandbox_double) - before > FILES  # the walk reads file by file
        assert len(globbed.entries) == 15  # d1, d10 and d11, five files each
        assert globbed == default_glob(fs, root, GlobQuery("d1*/*.txt"))
        content = GrepQuery("needle", output_mode="content", before=1, time_budget=_NO_TIME_LIMIT)
        assert fs.grep(root, content) == default_grep(fs, root, content)
    finally:
        runtime.destroy_conversation_sandbox()
        runtime.close()


def test_native_async_grep_and_glob_are_one_command(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    uploads = _tree(tmp_path)

    async def scenario() -> None:
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=f"os-search-{uuid.uuid4().hex[:10]}",
            conversations_root=ROOT,
            conversation_store=InMemoryConversationStore(),
        )
        async with runtime:
            fs = await runtime.get_file_system()
            await fs.upload_files(uploads)
            root = await fs.stat("tree")
            assert root is not None
            query = GrepQuery("needle", output_mode="count", time_budget=_NO_TIME_LIMIT)
            before = _requests(opensandbox_double)
            found = await fs.grep(root, query)
            grep_requests = _requests(opensandbox_double) - before
            before = _requests(opensandbox_double)
            globbed = await fs.glob(root, GlobQuery("**/f001*.txt"))
            glob_requests = _requests(opensandbox_double) - before
            assert grep_requests == 1
            assert glob_requests == 1
            assert len(found.entries) == len(range(0, FILES, 7))
            assert found == await async_default_grep(fs, root, query)
            assert len(globbed.entries) == 10  # f0010 to f0019
            assert globbed == await async_default_glob(fs, root, GlobQuery("**/f001*.txt"))
            await runtime.destroy_conversation_sandbox()

    asyncio.run(scenario())


def test_without_the_tools_the_search_walks(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillruntime.opensandbox import search

    real_request = search._request

    def tools_missing(script: str) -> SkillExecutionRequest:
        request = real_request(script)
        return request.model_copy(update={"command": "PATH=/nowhere; " + request.command})

    runtime = _sync_runtime(opensandbox_double)
    try:
        fs = runtime.get_file_system()
        fs.upload_files(_tree(tmp_path))
        root = fs.stat("tree")
        assert root is not None
        query = GrepQuery("needle", time_budget=_NO_TIME_LIMIT)
        expected = fs.grep(root, query)
        monkeypatch.setattr(search, "_request", tools_missing)
        before = _requests(opensandbox_double)
        assert fs.grep(root, query) == expected
        assert _requests(opensandbox_double) - before > FILES
        assert fs.glob(root, GlobQuery("*.txt")) == default_glob(fs, root, GlobQuery("*.txt"))
    finally:
        runtime.destroy_conversation_sandbox()
        runtime.close()


def test_odd_names_are_found_as_the_local_runtime_finds_them(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    # A newline (or a carriage return, which ends an execd line) split the listing; undecodable
    # bytes came back replaced (no such file) and grep missed the file.
    expected = local_answer(tmp_path)
    runtime = _sync_runtime(opensandbox_double)
    try:
        write_tree(runtime, BASE, odd_files())
        fs = runtime.get_file_system()
        root = fs.stat(BASE)
        assert root is not None
        found = answer(root.path, fs.glob(root, GLOB), [fs.grep(root, q) for q in GREPS])
        assert found == expected
    finally:
        runtime.destroy_conversation_sandbox()
        runtime.close()

    async def scenario() -> None:
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=f"os-search-{uuid.uuid4().hex[:10]}",
            conversations_root=ROOT,
            conversation_store=InMemoryConversationStore(),
        )
        async with runtime:
            done = await runtime.execute(
                SkillExecutionRequest(command=tree_command(BASE, odd_files()))
            )
            assert done.exit_code == 0, done.stderr
            fs = await runtime.get_file_system()
            root = await fs.stat(BASE)
            assert root is not None
            globbed = await fs.glob(root, GLOB)
            grepped = [await fs.grep(root, q) for q in GREPS]
            assert answer(root.path, globbed, grepped) == expected
            await runtime.destroy_conversation_sandbox()

    asyncio.run(scenario())
