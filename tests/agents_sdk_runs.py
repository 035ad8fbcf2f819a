"""Scripted Agents SDK runs shared by the tests, the resume child process and the benchmark.

The model is the SDK's own ``agents.testing.ScriptedModel``: each step is the output of one model
call (tool calls or a final message), so a run goes through the real ``Runner`` loop, the real
sandbox capabilities and the real skillruntime client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents import FunctionTool, RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.capabilities import Filesystem, Shell
from agents.testing import ScriptedModel, assistant_message, function_call
from skillruntime.openai_agents import (
    SkillRuntimeSandboxClient,
    SkillRuntimeSandboxClientOptions,
    skills_capability,
)

EXAMPLE_SKILLS = Path(__file__).resolve().parents[1] / "examples" / "skills"

REPORT_COMMAND = (
    "mkdir -p notes && sh skills/text-stats-*/scripts/run.sh "
    "skills/text-stats-*/assets/sample.txt 3 > notes/report.txt && cat notes/report.txt"
)
"""Runs the prepared text-stats skill on its sample and keeps the report in the workspace."""


def skill_steps() -> list[Any]:
    """load_skill text-stats, run it, answer."""
    return [
        [function_call("load_skill", {"skill_name": "text-stats"}, call_id="load")],
        [function_call("exec_command", {"cmd": REPORT_COMMAND}, call_id="run")],
        [assistant_message("The sample has 78 words.")],
    ]


def approval_tool() -> FunctionTool:
    """A tool that needs a human's approval: calling it pauses the run."""

    async def invoke(_context: Any, arguments: str) -> str:
        return "published " + json.loads(arguments)["path"]

    return FunctionTool(
        name="publish_report",
        description="Publish a workspace file (a human approves it first).",
        params_json_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
        needs_approval=True,
    )


def agent(model: ScriptedModel, skills: Path = EXAMPLE_SKILLS) -> SandboxAgent[Any]:
    """A sandbox agent with the shell, the file system and the prepared-skills capabilities."""
    return SandboxAgent(
        name="skills",
        instructions="Use the skills to answer.",
        model=model,
        tools=[approval_tool()],
        capabilities=[Shell(), Filesystem(), skills_capability([skills])],
    )


def run_config(
    client: SkillRuntimeSandboxClient,
    conversation_id: str | None = None,
    **sandbox: Any,
) -> RunConfig:
    """A run config using ``client`` (a new or named conversation) with tracing off."""
    options = SkillRuntimeSandboxClientOptions(conversation_id=conversation_id)
    return RunConfig(
        sandbox=SandboxRunConfig(client=client, options=options, **sandbox),
        tracing_disabled=True,
    )


def outputs(result: Any) -> list[str]:
    """The text of every tool output of a run result, in order."""
    return [str(item.output) for item in result.new_items if hasattr(item, "output")]
