"""Agents SDK runs use the example skills without ``configs``: their declared bootstrap runs.

A plain ``Agent`` with :func:`function_tools` activates ``text-stats`` and runs its script (exit
code 3 unless the bootstrap ran); a ``SandboxAgent`` with the skills capability, in the same
conversation after the function tools prepared the skill, finds the same bootstrapped copy.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from skillruntime.openai_agents import function_tools

import agents_sdk_runs as scripted
from agents_sdk_backends import local_backend
from skillruntime.core.tools import SkillTools
from skillruntime.local import LocalSkillRuntime

NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    shutil.copytree(scripted.EXAMPLE_SKILLS, root)
    return root


def _function_tools_run(runtime: LocalSkillRuntime, skills_root: Path) -> tuple[str, str]:
    """skill text-stats, then bash on the base directory the activation named."""
    tools = SkillTools(runtime, [skills_root])
    first = ScriptedModel(
        [
            [function_call("skill", {"command": "text-stats"}, call_id="s")],
            [assistant_message("loaded")],
        ]
    )
    agent = Agent(
        name="tools",
        instructions="Use the tools.",
        model=first,
        tools=list(function_tools(tools)),
    )
    loaded = asyncio.run(Runner.run(agent, "load", run_config=NO_TRACING))
    first.assert_complete()
    (activated,) = scripted.outputs(loaded)
    match = re.search(r"^Base directory for this skill: (.+)$", activated, re.MULTILINE)
    assert match, activated
    base = match.group(1)
    command = f"sh {base}/scripts/run.sh {base}/assets/sample.txt 3"
    second = ScriptedModel(
        [
            [function_call("bash", {"command": command}, call_id="b")],
            [assistant_message("done")],
        ]
    )
    result = asyncio.run(Runner.run(agent.clone(model=second), "run it", run_config=NO_TRACING))
    assert result.final_output == "done"
    (ran,) = scripted.outputs(result)
    second.assert_complete()
    return base, ran


def test_function_tools_run_the_example_skill_without_configs(
    skills_root: Path, tmp_path: Path
) -> None:
    root = tmp_path / "conversations"
    with LocalSkillRuntime(conversation_id="oa-declared", conversations_root=root) as runtime:
        base, ran = _function_tools_run(runtime, skills_root)
    assert "not bootstrapped" not in ran, ran
    assert "Exit code" not in ran, ran
    assert "words: 78" in ran
    assert (Path(base) / "build" / "stopwords.txt").is_file()


def test_the_skills_capability_after_the_function_tools_finds_a_bootstrapped_copy(
    skills_root: Path, tmp_path: Path
) -> None:
    backend = local_backend(tmp_path)
    conversation = "oa-shared"
    options = backend.options
    with LocalSkillRuntime(conversation_id=conversation, **options) as runtime:
        base, ran = _function_tools_run(runtime, skills_root)
    assert "words: 78" in ran
    model = ScriptedModel(scripted.skill_steps())
    result = asyncio.run(
        Runner.run(
            scripted.agent(model, skills_root),
            "How many words has the sample?",
            run_config=scripted.run_config(backend.client(), conversation),
        )
    )
    loaded, report = scripted.outputs(result)
    assert f"'path': 'skills/{Path(base).name}'" in loaded  # the copy the tools prepared
    assert "words: 78" in report
    assert "Process exited with code 0" in report
    model.assert_complete()
    workspace = backend.host_workspace(conversation)
    assert [p.name for p in (workspace / "skills").iterdir() if p.is_dir()] == [Path(base).name]
