"""The tool schema a plain ``Agent`` with :func:`function_tools` offers follows the active skills'
``allowed-tools`` (the VikingBot remote-skill RFC: the next model iteration uses the refreshed,
restricted schema), and a call to a tool the model was not offered is an error result, not the end
of the run.

Every run goes through the SDK's own ``Runner``; the model is the SDK's ``ScriptedModel`` (which
records the tools each call received) or, once, the SDK's ``OpenAIResponsesModel`` over its real
client against a scripted Responses server (which records the schema sent on the wire).
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    ModelBehaviorError,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolErrorFormatterArgs,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from skillruntime.openai_agents import (
    function_tools,
    function_tools_run_config,
    hidden_tool_message,
)

from agents_sdk_responses import ScriptedResponses
from agents_sdk_runs import EXAMPLE_SKILLS, outputs
from skillruntime.core.plugins.registry import create_async_runtime, create_runtime
from skillruntime.core.tools import AsyncSkillTools, SkillTools

NOTES_ONLY = """---
name: notes-only
description: Reads notes and echoes short messages. Use it to check tool restrictions.
allowed-tools: Read Grep Bash(echo:*)
---
# Notes only
"""

READ_ONLY = """---
name: read-only
description: Reads files. Use it to check the intersection of two skills' restrictions.
allowed-tools: Read LS
---
# Read only
"""

EVERY_TOOL = ["skill", "bash", "read", "write", "edit", "ls", "glob", "grep"]
NOTES_ONLY_TOOLS = ["skill", "bash", "read", "grep"]
NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    shutil.copytree(EXAMPLE_SKILLS, root)
    for name, text in (("notes-only", NOTES_ONLY), ("read-only", READ_ONLY)):
        (root / name).mkdir()
        (root / name / "SKILL.md").write_text(text)
    return root


def _offered(model: ScriptedModel) -> list[list[str]]:
    """The tool names each model call received, call by call."""
    return [[tool.name for tool in call.tools] for call in model.calls]


def _hidden_call_script() -> ScriptedModel:
    """Activate notes-only, call the hidden ``write``, run a refused and an admitted ``bash``."""
    return ScriptedModel(
        [
            [function_call("skill", {"command": "notes-only"}, call_id="s")],
            [function_call("write", {"file_path": "x.txt", "content": "no"}, call_id="w")],
            [function_call("bash", {"command": "touch y.txt"}, call_id="b")],
            [function_call("bash", {"command": "echo allowed"}, call_id="e")],
            [assistant_message("done")],
        ]
    )


def test_the_next_model_call_sees_only_the_tools_the_active_skills_allow(
    skills_root: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [
            [function_call("skill", {"command": "notes-only"}, call_id="s")],
            [function_call("read", {"file_path": "notes.txt"}, call_id="r")],
            [function_call("skill", {"command": "read-only"}, call_id="s2")],
            [assistant_message("done")],
        ]
    )
    with create_runtime("local", work_root=str(tmp_path / "work")) as runtime:
        (tmp_path / "work").mkdir(exist_ok=True)
        (tmp_path / "work" / "notes.txt").write_text("a note\n")
        tools = SkillTools(runtime, [skills_root])
        agent = Agent(name="tools", instructions="", model=model, tools=function_tools(tools))
        config = function_tools_run_config(tools, NO_TRACING)
        result = asyncio.run(Runner.run(agent, "go", run_config=config))
    assert result.final_output == "done"
    assert "a note" in outputs(result)[1]
    assert _offered(model) == [
        EVERY_TOOL,  # no skill active yet
        NOTES_ONLY_TOOLS,  # notes-only: Read Grep Bash(echo:*)
        NOTES_ONLY_TOOLS,
        ["skill", "read"],  # and read-only (Read LS): the intersection
    ]
    model.assert_complete()


def test_a_call_to_a_hidden_tool_is_an_error_result_and_the_run_goes_on(
    skills_root: Path, tmp_path: Path
) -> None:
    model = _hidden_call_script()
    with create_runtime("local", work_root=str(tmp_path / "work")) as runtime:
        tools = SkillTools(runtime, [skills_root])
        agent = Agent(name="tools", instructions="", model=model, tools=function_tools(tools))
        config = function_tools_run_config(tools, NO_TRACING)
        result = asyncio.run(Runner.run(agent, "go", run_config=config))
    assert result.final_output == "done"
    _activated, write, touch, echo = outputs(result)
    assert write == (
        "Error: tool 'write' is not available: the allowed-tools of the active skills "
        "('notes-only') do not allow it, and it did not run; the tools available now: "
        "skill, bash, read, grep"
    )
    assert touch.startswith("Error:")  # offered, but Bash(echo:*) refuses the command
    assert "echo:*" in touch
    assert "allowed" in echo
    assert not (tmp_path / "work" / "x.txt").exists()
    assert not (tmp_path / "work" / "y.txt").exists()
    assert _offered(model) == [EVERY_TOOL, *[NOTES_ONLY_TOOLS] * 4]
    model.assert_complete()


def test_the_sdk_setting_alone_also_keeps_the_run_going(skills_root: Path, tmp_path: Path) -> None:
    """What a user sets without the helper: the SDK's own message answers the hidden call."""
    model = _hidden_call_script()
    with create_runtime("local", work_root=str(tmp_path / "work")) as runtime:
        tools = SkillTools(runtime, [skills_root])
        agent = Agent(name="tools", instructions="", model=model, tools=function_tools(tools))
        config = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")
        result = asyncio.run(Runner.run(agent, "go", run_config=config))
    assert result.final_output == "done"
    assert outputs(result)[1] == "Tool 'write' not found."
    assert not (tmp_path / "work" / "x.txt").exists()
    model.assert_complete()


def test_the_sdk_default_run_config_ends_the_run_on_a_hidden_tool(
    skills_root: Path, tmp_path: Path
) -> None:
    """Why the run config matters: the SDK's default raises on a tool missing from the schema."""
    model = _hidden_call_script()
    with create_runtime("local", work_root=str(tmp_path / "work")) as runtime:
        tools = SkillTools(runtime, [skills_root])
        agent = Agent(name="tools", instructions="", model=model, tools=function_tools(tools))
        with pytest.raises(ModelBehaviorError, match="write"):
            asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING))
    assert not (tmp_path / "work" / "x.txt").exists()


def test_a_new_turn_offers_every_tool_again(skills_root: Path, tmp_path: Path) -> None:
    """One ``SkillTools.turn()`` per user message: the restriction does not outlive it."""
    first = ScriptedModel(
        [
            [function_call("skill", {"command": "notes-only"}, call_id="s")],
            [assistant_message("first")],
        ]
    )
    second = ScriptedModel(
        [
            [function_call("write", {"file_path": "x.txt", "content": "yes"}, call_id="w")],
            [assistant_message("second")],
        ]
    )
    with create_runtime("local", work_root=str(tmp_path / "work")) as runtime:
        tools = SkillTools(runtime, [skills_root])
        agent = Agent(name="tools", instructions="", tools=function_tools(tools))
        config = function_tools_run_config(tools, NO_TRACING)
        for model, answer in ((first, "first"), (second, "second")):
            with tools.turn():
                result = asyncio.run(Runner.run(agent.clone(model=model), "go", run_config=config))
            assert result.final_output == answer
    assert _offered(first) == [EVERY_TOOL, NOTES_ONLY_TOOLS]
    assert _offered(second) == [EVERY_TOOL, EVERY_TOOL]
    assert (tmp_path / "work" / "x.txt").read_text() == "yes"


def test_the_async_tool_set_is_restricted_the_same_way(skills_root: Path, tmp_path: Path) -> None:
    model = _hidden_call_script()

    async def run() -> Any:
        async with create_async_runtime("local", work_root=str(tmp_path / "work")) as runtime:
            tools = AsyncSkillTools(runtime, [skills_root])
            agent = Agent(name="tools", instructions="", model=model, tools=function_tools(tools))
            return await Runner.run(
                agent, "go", run_config=function_tools_run_config(tools, NO_TRACING)
            )

    result = asyncio.run(run())
    assert result.final_output == "done"
    _activated, write, touch, echo = outputs(result)
    assert write.startswith("Error: tool 'write' is not available")
    assert touch.startswith("Error:")
    assert "allowed" in echo
    assert _offered(model) == [EVERY_TOOL, *[NOTES_ONLY_TOOLS] * 4]
    assert not (tmp_path / "work" / "x.txt").exists()


def test_the_sdk_responses_model_is_sent_the_restricted_schema(
    skills_root: Path, tmp_path: Path
) -> None:
    """The same through the SDK's own model client: the ``tools`` of each request on the wire."""
    steps = [
        [("skill", {"command": "notes-only"})],
        [("write", {"file_path": "x.txt", "content": "no"})],
        [("bash", {"command": "echo allowed"})],
        "done",
    ]
    with (
        ScriptedResponses(steps) as server,
        create_runtime("local", work_root=str(tmp_path / "work")) as runtime,
    ):
        tools = SkillTools(runtime, [skills_root])
        agent = Agent(
            name="tools", instructions="", model=server.model(), tools=function_tools(tools)
        )
        config = function_tools_run_config(tools, NO_TRACING)
        result = asyncio.run(Runner.run(agent, "go", run_config=config))
        sent = server.tool_names()
    assert result.final_output == "done"
    _activated, write, echo = outputs(result)
    assert write.startswith("Error: tool 'write' is not available")
    assert "allowed" in echo
    assert sent == [EVERY_TOOL, *[NOTES_ONLY_TOOLS] * 3]
    assert not (tmp_path / "work" / "x.txt").exists()


def _format(config: RunConfig, kind: Any, name: str) -> str | None:
    """What ``config``'s tool error formatter answers for an error of ``kind`` on tool ``name``."""
    formatter = config.tool_error_formatter
    assert formatter is not None
    args: ToolErrorFormatterArgs[Any] = ToolErrorFormatterArgs(
        kind=kind,
        tool_type="function",
        tool_name=name,
        call_id="c",
        default_message="default",
        run_context=RunContextWrapper(context=None),
    )

    async def answer() -> str | None:
        message = formatter(args)
        return await message if inspect.isawaitable(message) else message

    return asyncio.run(answer())


def test_the_run_config_helper_keeps_the_callers_config_and_formatter(
    skills_root: Path,
) -> None:
    seen: list[str] = []

    def mine(args: ToolErrorFormatterArgs[Any]) -> str:
        seen.append(args.tool_name)
        return f"mine: {args.tool_name}"

    base = RunConfig(tracing_disabled=True, workflow_name="wf", tool_error_formatter=mine)
    with create_runtime("local") as runtime:
        tools = SkillTools(runtime, [skills_root])
        config = function_tools_run_config(tools, base)
        assert base.tool_not_found_behavior == "raise_error"  # the caller's config is unchanged
        assert base.tool_error_formatter is mine
        assert config.tool_not_found_behavior == "return_error_to_model"
        assert (config.tracing_disabled, config.workflow_name) == (True, "wf")
        assert not tools.dispatch("skill", {"command": "notes-only"}).startswith("Error:")
        hidden = _format(config, "tool_not_found", "edit")
        assert hidden == hidden_tool_message(tools, "edit")
        assert "'notes-only'" in str(hidden)
        # Not a tool of this set, or another kind of error: the caller's formatter answers.
        assert _format(config, "tool_not_found", "lookup") == "mine: lookup"
        assert _format(config, "tool_exception", "read") == "mine: read"
        assert seen == ["lookup", "read"]
        # Without a formatter of the caller's, the SDK's default message stands (None).
        assert _format(function_tools_run_config(tools), "tool_not_found", "lookup") is None
        # A tool hidden when the model was called but offered again now: still not run.
        tools.reset_activations()
        assert _format(config, "tool_not_found", "edit") == (
            "Error: tool 'edit' was not offered on this step and did not run; the tools "
            "available now: skill, bash, read, write, edit, ls, glob, grep"
        )
