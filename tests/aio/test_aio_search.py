"""AIO ``glob``/``grep`` over a tree of many files: one command (one request on ``/v1/bash``,
two on ``/v1/shell``) from the sync and the native async runtime, the default's answer, and the
default walk when the sandbox lacks the tools."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from doubles.aio import AioDouble
from odd_names_search import BASE, GLOB, GREPS, answer, local_answer
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.files import search_command
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

ROOT = "/home/gem/workspace/conversations"
FILES = 60
"""Enough files for a walk to cost a request per file while the search stays one command; the
default walk is compared over HTTP, request by request, so a larger tree only costs time."""
_NO_TIME_LIMIT = 3600.0


def _tree() -> dict[str, bytes]:
    """The searched files below ``tree/`` (created with one command: the searches are tested
    here, not 600 upload requests)."""
    files = {}
    for index in range(FILES):
        marker = "needle" if index % 7 == 0 else "hay"
        files[f"d{index % 12}/f{index:04d}.txt"] = f"line one\n{marker} two\n".encode()
    return files


@pytest.mark.parametrize("fixture_name", ["aio_bash", "aio_shell"])
def test_sync_grep_and_glob_are_one_command(
    fixture_name: str, request: pytest.FixtureRequest
) -> None:
    double: AioDouble = request.getfixturevalue(fixture_name)
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"search-{uuid.uuid4().hex[:8]}",
        conversations_root=ROOT,
    ) as runtime:
        fs = runtime.get_file_system()
        write_tree(runtime, "tree", _tree())
        root = fs.stat("tree")
        assert root is not None
        query = GrepQuery("needle", time_budget=_NO_TIME_LIMIT)
        fs.grep(root, query)  # the command API is detected on the first command
        before = runtime.client.request_count
        found = fs.grep(root, query)
        grep_requests = runtime.client.request_count - before
        before = runtime.client.request_count
        globbed = fs.glob(root, GlobQuery("d1*/*.txt"))
        glob_requests = runtime.client.request_count - before
        expected_requests = 1 if fixture_name == "aio_bash" else 2
        assert grep_requests == expected_requests <= 3
        assert glob_requests == expected_requests
        assert len(found.entries) == len(range(0, FILES, 7))
        before = runtime.client.request_count
        assert found == default_grep(fs, root, query)
        assert runtime.client.request_count - before > FILES  # the walk reads file by file
        assert len(globbed.entries) == 15  # d1, d10 and d11, five files each
        assert globbed == default_glob(fs, root, GlobQuery("d1*/*.txt"))


@pytest.mark.parametrize("fixture_name", ["aio_bash", "aio_shell"])
def test_native_async_grep_and_glob_are_one_command(
    fixture_name: str, request: pytest.FixtureRequest
) -> None:
    double: AioDouble = request.getfixturevalue(fixture_name)

    async def scenario() -> None:
        async with AsyncAioSkillRuntime(
            base_url=double.url,
            token=double.token,
            conversation_id=f"search-{uuid.uuid4().hex[:8]}",
            conversations_root=ROOT,
        ) as runtime:
            fs = await runtime.get_file_system()
            done = await runtime.execute(
                SkillExecutionRequest(command=tree_command("tree", _tree()))
            )
            assert done.exit_code == 0, done.stderr
            root = await fs.stat("tree")
            assert root is not None
            query = GrepQuery("needle", output_mode="content", time_budget=_NO_TIME_LIMIT)
            await fs.grep(root, query)
            before = runtime.client.request_count
            found = await fs.grep(root, query)
            grep_requests = runtime.client.request_count - before
            before = runtime.client.request_count
            globbed = await fs.glob(root, GlobQuery("**/f001*.txt"))
            glob_requests = runtime.client.request_count - before
            expected_requests = 1 if fixture_name == "aio_bash" else 2
            assert grep_requests == expected_requests
            assert glob_requests == expected_requests
            assert found == await async_default_grep(fs, root, query)
            assert len(found.entries) == len(range(0, FILES, 7))
            assert len(globbed.entries) == 10  # f0010 to f0019
            assert globbed == await async_default_glob(fs, root, GlobQuery("**/f001*.txt"))

    asyncio.run(scenario())


def test_without_the_tools_the_search_walks(
    aio_bash: AioDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_script = search_command.search_script

    def tools_missing(path: str, depth: int, *, content: GrepQuery | None) -> str:
        return "PATH=/nowhere; " + real_script(path, depth, content=content)

    with AioSandboxSkillRuntime(
        base_url=aio_bash.url,
        token=aio_bash.token,
        conversation_id=f"search-{uuid.uuid4().hex[:8]}",
        conversations_root=ROOT,
    ) as runtime:
        fs = runtime.get_file_system()
        write_tree(runtime, "tree", _tree())
        root = fs.stat("tree")
        assert root is not None
        query = GrepQuery("needle", time_budget=_NO_TIME_LIMIT)
        expected = fs.grep(root, query)
        monkeypatch.setattr("skillruntime.aio.files.search_script", tools_missing)
        before = runtime.client.request_count
        assert fs.grep(root, query) == expected
        assert runtime.client.request_count - before > FILES


@pytest.mark.parametrize("fixture_name", ["aio_bash", "aio_shell"])
def test_odd_names_are_found_as_the_local_runtime_finds_them(
    fixture_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # A newline split the listing (a missing file listed, the real one lost); undecodable bytes
    # came back replaced (no such file) and grep missed the file.
    double: AioDouble = request.getfixturevalue(fixture_name)
    expected = local_answer(tmp_path)
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"search-{uuid.uuid4().hex[:8]}",
        conversations_root=ROOT,
    ) as runtime:
        write_tree(runtime, BASE, odd_files())
        fs = runtime.get_file_system()
        root = fs.stat(BASE)
        assert root is not None
        found = answer(root.path, fs.glob(root, GLOB), [fs.grep(root, q) for q in GREPS])
    assert found == expected

    async def scenario() -> None:
        async with AsyncAioSkillRuntime(
            base_url=double.url,
            token=double.token,
            conversation_id=f"search-{uuid.uuid4().hex[:8]}",
            conversations_root=ROOT,
        ) as runtime:
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

    asyncio.run(scenario())
