"""A plain ``Agent`` (no sandbox beta) with the ``SkillTools`` set as ``FunctionTool``s, run through
the SDK's ``Runner`` on the local runtime and the OpenSandbox and AIO doubles; errors come back as
results. How the offered tools follow the active skills' ``allowed-tools``: test_tool_schema.py."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from skillruntime.openai_agents import function_tools

from agents_sdk_backends import Backend, aio_backend, local_backend, opensandbox_backend
from agents_sdk_runs import EXAMPLE_SKILLS, outputs
from doubles.aio import AioDouble
from doubles.opensandbox.harness import OpenSandboxDouble
from skillruntime.core.plugins.registry import create_runtime
from skillruntime.core.tools.toolset import SkillTools

RESTRICTED = """---
name: notes-only
description: Reads notes and echoes short messages. Use it to check tool restrictions.
allowed-tools: Read Grep Bash(echo:*)
---
# Notes only
"""

NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    shutil.copytree(EXAMPLE_SKILLS, root)
    (root / "notes-only").mkdir()
    (root / "notes-only" / "SKILL.md").write_text(RESTRICTED)
    return root


@pytest.fixture(params=["local", "opensandbox", "aio"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return local_backend(tmp_path)
    if request.param == "opensandbox":
        double: OpenSandboxDouble = request.getfixturevalue("opensandbox_double")
        return opensandbox_backend(double, tmp_path)
    aio: AioDouble = request.getfixturevalue("aio_double")
    return aio_backend(aio)


def test_function_tools_keep_names_schemas_and_descriptions(skills_root: Path) -> None:
    with create_runtime("local") as runtime:
        tools = SkillTools(runtime, [skills_root])
        converted = function_tools(tools)
        assert [tool.name for tool in converted] == [tool.name for tool in tools.all_tools]
        for tool, original in zip(converted, tools.all_tools, strict=True):
            assert tool.params_json_schema == original.parameters
            assert tool.description == original.description
            assert tool.strict_json_schema is False


def test_a_plain_agent_runs_a_skill_through_the_function_tools(
    backend: Backend, skills_root: Path
) -> None:
    conversation = f"oa-tools-{backend.name}"
    model = ScriptedModel(
        [
            [function_call("skill", {"command": "text-stats"}, call_id="s")],
            [
                function_call(
                    "bash",
                    {"command": "mkdir -p notes && echo alpha > notes/report.txt"},
                    call_id="b",
                )
            ],
            [function_call("read", {"file_path": "notes/report.txt"}, call_id="r")],
            [function_call("read", {"file_path": "/etc/../../outside"}, call_id="e")],
            [assistant_message("done")],
        ]
    )
    try:
        with create_runtime(backend.name, conversation_id=conversation, **backend.options) as rt:
            tools = SkillTools(rt, [skills_root])
            agent = Agent(name="tools", instructions="Use the tools.", model=model)
            agent.tools = list(function_tools(tools))
            result = asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING))
            assert result.final_output == "done"
            activated, ran, read, refused = outputs(result)
            base = tools.prepared_skill("text-stats")
            assert base is not None
            assert base.base_path in activated
            assert "Exit code" not in ran or "Exit code: 0" in ran
            assert "alpha" in read
            assert refused.startswith("Error:")
            model.assert_complete()
        report = backend.host_workspace(conversation) / "notes" / "report.txt"
        assert report.read_text() == "alpha\n"
    finally:
        backend.cleanup(conversation)


def test_with_every_tool_offered_a_call_the_skills_do_not_allow_answers_a_refusal(
    skills_root: Path, tmp_path: Path
) -> None:
    """``hide_disallowed=False`` (for a run config that cannot return errors to the model): every
    tool stays offered, a call ``allowed-tools`` forbids reaches the tool, which refuses it with a
    result the model acts on, and nothing runs."""
    model = ScriptedModel(
        [
            [function_call("skill", {"command": "notes-only"}, call_id="s")],
            [function_call("write", {"file_path": "x.txt", "content": "no"}, call_id="w")],
            [function_call("bash", {"command": "touch y.txt"}, call_id="b")],
            [function_call("bash", {"command": "echo allowed"}, call_id="e")],
            [assistant_message("done")],
        ]
    )
    with create_runtime("local", work_root=str(tmp_path / "work")) as runtime:
        tools = SkillTools(runtime, [skills_root])
        converted = function_tools(tools, hide_disallowed=False)
        agent = Agent(name="tools", instructions="", model=model, tools=list(converted))
        result = asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING))
    assert result.final_output == "done"
    _activated, write, touch, echo = outputs(result)
    assert write.startswith("Error:")
    assert "notes-only" in write
    assert touch.startswith("Error:")
    assert "allowed" in echo
    assert not (tmp_path / "work" / "x.txt").exists()
    assert not (tmp_path / "work" / "y.txt").exists()
    for call in model.calls:
        assert {tool.name for tool in call.tools} == {tool.name for tool in tools.all_tools}
    model.assert_complete()
