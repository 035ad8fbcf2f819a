"""AsyncSkillTools over native async runtimes: the same results as SkillTools over the sync
runtime of the same kind, call for call, and one preparation under concurrent activation."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.files.publishing import LocalDirectoryPublisher
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.tools import SkillTools
from skillruntime.core.tools.async_toolset import AsyncSkillTool, AsyncSkillTools
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

SCRIPT: list[tuple[str, Any]] = [
    ("bash", {"command": "echo before-activation"}),
    ("skill", {"command": "demo"}),
    ("skill", {"command": "missing"}),
    ("bash", {"command": "echo out; echo err >&2; exit 3"}),
    ("bash", {"command": "sh skills/*/scripts/hello.sh", "timeout_seconds": 10}),
    ("bash", {}),
    ("bash", '{"command": '),
    ("write", {"file_path": "notes/a.txt", "content": "line one\nline two\nline three\n"}),
    ("write", {"file_path": "notes/a.txt", "content": "line one\nline two\nline three\n"}),
    ("read", {"file_path": "notes/a.txt", "offset": 2}),
    ("read", {"file_path": "notes/a.txt", "offset": 9}),
    ("read", {"file_path": "notes/missing.txt"}),
    ("read", {"file_path": "notes"}),
    ("edit", {"file_path": "notes/a.txt", "old_string": "two", "new_string": "2"}),
    ("edit", {"file_path": "notes/a.txt", "old_string": "line", "new_string": "L"}),
    ("edit", {"file_path": "notes/a.txt", "old_string": "absent", "new_string": "x"}),
    ("ls", {"path": "notes"}),
    ("ls", {"depth": 3}),
    ("glob", {"pattern": "**/*.txt"}),
    ("glob", {"pattern": "*.nothing"}),
    ("grep", {"pattern": "line", "output_mode": "content", "path": "notes"}),
    ("grep", {"pattern": "L|2", "output_mode": "count"}),
    ("grep", {"pattern": "(", "path": "notes"}),
    ("publish_file", {"file_path": "notes/a.txt", "file_name": "report.txt"}),
    ("publish_file", {"file_path": "notes/none.txt"}),
    ("nonexistent", {}),
    ("skill", {"command": "readonly"}),
    ("bash", {"command": "echo refused"}),
    ("read", {"file_path": "notes/a.txt"}),
]


def _skills(make_skill: Callable[..., Skill]) -> list[Skill]:
    return [
        make_skill(
            "demo",
            body="Run scripts/hello.sh.\n",
            files={"scripts/hello.sh": "echo hello from the skill\n", "notes.md": "n\n"},
        ),
        make_skill("readonly", allowed_tools="read ls"),
    ]


def _run_sync(runtime: SkillRuntime, skills: list[Skill], publish: Path) -> list[str]:
    tools = SkillTools(runtime, skills, publisher=LocalDirectoryPublisher(publish))
    results = [SkillTools.dispatch(tools, name, arguments) for name, arguments in SCRIPT]
    results.append(",".join(tool.name for tool in tools.tools))
    return results


async def _run_async(runtime: AsyncSkillRuntime, skills: list[Skill], publish: Path) -> list[str]:
    tools = AsyncSkillTools(runtime, skills, publisher=LocalDirectoryPublisher(publish))
    results = [await tools.adispatch(name, arguments) for name, arguments in SCRIPT]
    results.append(",".join(tool.name for tool in tools.tools))
    return results


def _normalised(results: list[str], *replacements: tuple[str, str]) -> list[str]:
    """``results`` with each replacement applied and the random folder of a published file
    (``PUB/<16 hex>/``) blanked."""
    out = []
    for result in results:
        text = result
        for old, new in replacements:
            text = text.replace(old, new)
        out.append(re.sub(r"PUB/[0-9a-f]{16}/", "PUB/*/", text))
    return out


def test_local_async_tools_answer_like_the_sync_tools(
    tmp_path: Path, make_skill: Callable[..., Skill]
) -> None:
    skills = _skills(make_skill)
    sync_root, async_root = tmp_path / "sync-conv", tmp_path / "async-conv"
    with LocalSkillRuntime(conversation_id="c1", conversations_root=sync_root) as runtime:
        expected = _run_sync(runtime, skills, tmp_path / "pub-sync")

    async def scenario() -> list[str]:
        async with AsyncLocalSkillRuntime(
            conversation_id="c1", conversations_root=async_root
        ) as runtime:
            return await _run_async(runtime, skills, tmp_path / "pub-async")

    actual = asyncio.run(scenario())
    assert "Exit code: 3" in expected[3]
    assert "hello from the skill" in expected[4]
    assert expected[-1] == "skill,read,ls"
    assert _normalised(actual, (str(async_root), "ROOT"), ("pub-async", "PUB")) == _normalised(
        expected, (str(sync_root.resolve()), "ROOT"), (str(sync_root), "ROOT"), ("pub-sync", "PUB")
    )
    assert (tmp_path / "pub-async").exists()


def test_opensandbox_async_tools_answer_like_the_sync_tools(
    tmp_path: Path, make_skill: Callable[..., Skill], tools_opensandbox: OpenSandboxDouble
) -> None:
    skills = _skills(make_skill)
    double = tools_opensandbox
    conversation = f"tools-{uuid.uuid4().hex[:12]}"
    sync_runtime = OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=conversation,
        conversation_store=InMemoryConversationStore(),
    )
    with sync_runtime:
        try:
            expected = _run_sync(sync_runtime, skills, tmp_path / "pub-sync")
        finally:
            sync_runtime.destroy_conversation_sandbox()

    async def scenario() -> list[str]:
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=double.domain,
            api_key=double.api_key,
            conversation_id=conversation,
            conversation_store=InMemoryConversationStore(),
        )
        async with runtime:
            try:
                return await _run_async(runtime, skills, tmp_path / "pub-async")
            finally:
                await runtime.destroy_conversation_sandbox()

    actual = asyncio.run(scenario())
    assert "Exit code: 3" in expected[3]
    assert _normalised(actual, ("pub-async", "PUB")) == _normalised(expected, ("pub-sync", "PUB"))


@pytest.mark.parametrize("fixture", ["tools_aio_bash", "tools_aio_shell"])
def test_aio_async_tools_answer_like_the_sync_tools(
    tmp_path: Path,
    make_skill: Callable[..., Skill],
    request: pytest.FixtureRequest,
    fixture: str,
) -> None:
    skills = _skills(make_skill)
    double: AioDouble = request.getfixturevalue(fixture)
    command_api = "bash" if fixture == "tools_aio_bash" else "shell"
    conversation = f"tools-{uuid.uuid4().hex[:12]}"
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=conversation,
        command_api=command_api,
    ) as runtime:
        expected = _run_sync(runtime, skills, tmp_path / "pub-sync")
        # The async object works in a second conversation of the same service: same paths but
        # for the conversation id.
        other = f"{conversation}-b"

    async def scenario() -> list[str]:
        async with AsyncAioSkillRuntime(
            base_url=double.url,
            token=double.token,
            conversation_id=other,
            command_api=command_api,
        ) as runtime:
            return await _run_async(runtime, skills, tmp_path / "pub-async")

    actual = asyncio.run(scenario())
    assert "Exit code: 3" in expected[3]
    assert _normalised(actual, (other, "CONV"), ("pub-async", "PUB")) == _normalised(
        expected, (conversation, "CONV"), ("pub-sync", "PUB")
    )


class _CountingAsyncRuntime(AsyncSkillRuntime):
    """Delegates to ``inner`` and counts ``prepare`` calls (each one slowed down a little)."""

    def __init__(self, inner: AsyncSkillRuntime) -> None:
        self.inner = inner
        self.prepare_calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def default_working_directory(self) -> str:
        return self.inner.default_working_directory

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self.prepare_calls += 1
        await asyncio.sleep(0.05)
        return await self.inner.prepare(request)

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        return await self.inner.execute(request)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        return await self.inner.get_file_system()

    async def close(self) -> None:
        await self.inner.close()


def test_concurrent_activations_prepare_once(
    tmp_path: Path, make_skill: Callable[..., Skill]
) -> None:
    skill = make_skill("demo", files={"a.txt": "a\n"})

    async def scenario() -> tuple[int, list[str]]:
        inner = AsyncLocalSkillRuntime(conversation_id="c1", conversations_root=tmp_path / "c")
        async with _CountingAsyncRuntime(inner) as runtime:
            tools = AsyncSkillTools(runtime, [skill])
            results = await asyncio.gather(
                *(tools.adispatch("skill", {"command": "demo"}) for _ in range(20))
            )
            return runtime.prepare_calls, results

    calls, results = asyncio.run(scenario())
    assert calls == 1
    assert len(set(results)) == 1
    assert results[0].startswith("Runtime: local\n")


def test_a_failed_activation_is_retried(tmp_path: Path, make_skill: Callable[..., Skill]) -> None:
    skill = make_skill("needs", metadata={"requires": {"bins": ["definitely-not-installed-x"]}})

    async def scenario() -> list[str]:
        async with AsyncLocalSkillRuntime(
            conversation_id="c1", conversations_root=tmp_path / "c"
        ) as runtime:
            tools = AsyncSkillTools(runtime, [skill])
            first = await tools.adispatch("skill", {"command": "needs"})
            second = await tools.adispatch("skill", {"command": "needs"})
            return [first, second, ",".join(tools.active_skills)]

    first, second, active = asyncio.run(scenario())
    assert first == second
    assert "missing in the local runtime: bin definitely-not-installed-x" in first
    assert active == ""


def test_the_sync_invoke_of_an_async_tool_is_an_error_result(tmp_path: Path) -> None:
    async def scenario() -> AsyncSkillTool:
        async with AsyncLocalSkillRuntime(work_root=tmp_path / "w") as runtime:
            tool = AsyncSkillTools(runtime).get("bash")
            assert tool is not None
            return tool

    tool = asyncio.run(scenario())
    assert SkillToolInvoke.sync(tool).startswith("Error: ")


class SkillToolInvoke:
    """Calls the unpatched sync ``run`` (the suite's ``call_path`` fixture patches ``invoke``)."""

    @staticmethod
    def sync(tool: AsyncSkillTool) -> str:
        return tool.run({"command": "echo x"})


@pytest.mark.parametrize("name", ["bash", "read", "grep"])
def test_cancelling_an_awaited_tool_call_propagates(tmp_path: Path, name: str) -> None:
    arguments = {
        "bash": {"command": "sleep 30"},
        "read": {"file_path": "a.txt"},
        "grep": {"pattern": "x"},
    }[name]

    async def scenario() -> str:
        async with AsyncLocalSkillRuntime(work_root=tmp_path / "w") as runtime:
            tools = AsyncSkillTools(runtime)
            task = asyncio.create_task(tools.adispatch(name, arguments))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await tools.adispatch("bash", {"command": "echo usable"})

    assert asyncio.run(scenario()) == "usable"
