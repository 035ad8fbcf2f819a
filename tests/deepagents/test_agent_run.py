"""A scripted deepagents agent activates a skill and runs its script in the sandbox: on the local
runtime, the OpenSandbox double and the AIO double, sync (``invoke``) and async (``ainvoke``).

The skill (``text-stats``, with a bootstrap step) lives on this host; the agent gets it through
deepagents' skills middleware from :attr:`SkillRuntimeBackend.skill_sources`, and the script only
works if the skill was really prepared (uploaded and bootstrapped) inside the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain_core.messages import ToolMessage

from deepagents_agent import ScriptedSkillModel
from doubles.aio import AioDouble
from doubles.opensandbox import OpenSandboxDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.aio.async_runtime import AsyncAioSkillRuntime
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.deepagents import RuntimeSkills, SkillRuntimeBackend
from skillruntime.local import LocalSkillRuntime
from skillruntime.opensandbox import OpenSandboxSkillRuntime


def _command(base: str) -> str:
    return f"sh {base}/scripts/run.sh {base}/assets/sample.txt 3"


def _run_agent(backend: SkillRuntimeBackend, *, use_async: bool) -> list[ToolMessage]:
    model = ScriptedSkillModel(skill="text-stats", command=_command)
    agent = create_deep_agent(model=model, backend=backend, skills=backend.skill_sources)
    request = {"messages": [{"role": "user", "content": "Profile the sample text."}]}

    async def run_async() -> dict[str, Any]:
        try:
            return await agent.ainvoke(request)
        finally:  # the async runtime lives on this loop: close it here
            if backend.async_runtime is not None:
                await backend.async_runtime.close()

    state = asyncio.run(run_async()) if use_async else agent.invoke(request)
    assert "read_file" in model.seen_tools
    assert "execute" in model.seen_tools
    assert state["messages"][-1].content.startswith("Result:")
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def _check_run(
    backend: SkillRuntimeBackend, skills: RuntimeSkills, tools: list[ToolMessage]
) -> None:
    assert [m.name for m in tools] == ["read_file", "execute"]
    prepared = skills.prepared("text-stats")
    assert prepared is not None
    runtime_root = backend.runtime.default_working_directory
    assert prepared.base_path.startswith(runtime_root)  # prepared inside the conversation
    assert f"prepared in the runtime at `{prepared.base_path}`" in str(tools[0].content)
    output = str(tools[1].content)
    assert "file: sample.txt" in output
    assert "top words (stopwords excluded):" in output
    fs = backend.runtime.get_file_system()
    # The bootstrap step ran in the runtime, and the entry now holds the activation text.
    assert fs.exists(posixpath.join(prepared.base_path, "build", "stopwords.txt"))
    entry = fs.read_text(posixpath.join(backend.skill_sources[0], "text-stats", "SKILL.md"))
    assert prepared.base_path in entry


def _backend(
    runtime: SkillRuntime, skills_root: Path, **kwargs: object
) -> tuple[SkillRuntimeBackend, RuntimeSkills]:
    skills = RuntimeSkills([skills_root / "text-stats", skills_root / "csv-report"])
    return SkillRuntimeBackend(runtime, skills=skills, **kwargs), skills  # type: ignore[arg-type]


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_local_agent_runs_a_skill_prepared_in_its_workspace(
    skills_root: Path, tmp_path: Path, use_async: bool
) -> None:
    with LocalSkillRuntime(conversation_id="agent", conversations_root=tmp_path / "c") as runtime:
        backend, skills = _backend(runtime, skills_root)
        tools = _run_agent(backend, use_async=use_async)
        _check_run(backend, skills, tools)
        # The skill's host directory is untouched: the run used the prepared copy.
        assert not (skills_root / "text-stats" / "build").exists()
        assert skills.prepared("csv-report") is None  # never activated, never uploaded


@pytest.fixture
def opensandbox_runtime(opensandbox_double: OpenSandboxDouble) -> Iterator[SkillRuntime]:
    runtime = OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain,
        api_key=opensandbox_double.api_key,
        conversation_id="deepagents-agent",
        conversation_store=InMemoryConversationStore(),
    )
    try:
        yield runtime
    finally:
        with contextlib.suppress(Exception):
            runtime.destroy_conversation_sandbox()
        runtime.close()


def test_opensandbox_agent_runs_a_skill_inside_the_sandbox(
    skills_root: Path, opensandbox_runtime: SkillRuntime, opensandbox_double: OpenSandboxDouble
) -> None:
    backend, skills = _backend(opensandbox_runtime, skills_root)
    tools = _run_agent(backend, use_async=False)
    _check_run(backend, skills, tools)
    prepared = skills.prepared("text-stats")
    assert prepared is not None
    # The copy is in the sandbox's own files, under its /workspace.
    (sandbox,) = [s for s in opensandbox_double.sandboxes() if s["state"] == "Running"]
    workspace = opensandbox_double.workspace_of(sandbox["id"])
    copy = workspace / posixpath.relpath(prepared.base_path, "/workspace")
    assert (copy / "scripts" / "run.sh").is_file()


@pytest.mark.parametrize("double_name", ["aio_bash", "aio_shell"])
def test_aio_agent_runs_a_skill_inside_the_sandbox_async(
    skills_root: Path, request: pytest.FixtureRequest, double_name: str
) -> None:
    double: AioDouble = request.getfixturevalue(double_name)
    options = {"base_url": double.url, "token": double.token, "conversation_id": "agent"}
    with AioSandboxSkillRuntime(**options) as runtime:  # type: ignore[arg-type]
        backend, skills = _backend(
            runtime, skills_root, async_runtime=AsyncAioSkillRuntime(**options)
        )
        tools = _run_agent(backend, use_async=True)
        _check_run(backend, skills, tools)
        prepared = skills.prepared("text-stats")
        assert prepared is not None
        assert (double.host_path(prepared.base_path) / "build" / "stopwords.txt").is_file()
