"""A scripted OpenAI Agents SDK run (``SandboxAgent`` through the SDK's ``Runner``) on the Docker
runtime, on the real Docker Engine.

The same runs as ``tests/openai_agents/test_sandbox_agent.py`` gives the other runtimes: the
prepared-skills capability lists the skills, ``load_skill`` prepares one in the conversation's
container (its bootstrap runs there), ``exec_command`` runs its script there, and the files land
in the conversation's workspace inside the container's volume, not on the SDK's side. A failing
bootstrap, an unknown skill and malformed arguments are tool results and the run goes on.

The client is ``SkillRuntimeSandboxClient.for_runtime("docker", ...)`` (the runtime found
through its entry point, as for every backend); the workspace is then read through a second
runtime object attaching the same conversation (same SQLite conversation store), which also
destroys the conversation at the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Runner
from agents.testing import ScriptedModel, function_call
from skillruntime.openai_agents import SkillRuntimeSandboxClient

import agents_sdk_runs as scripted
from docker_engine import IMAGE_VARIABLE, TEST_LABEL, Engine
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.docker import DockerSkillRuntime


@dataclass
class DockerBackend:
    """Options of the Docker runtime for the client, and a runtime object per conversation."""

    options: dict[str, Any]

    def client(self) -> SkillRuntimeSandboxClient:
        return SkillRuntimeSandboxClient.for_runtime("docker", **self.options)

    def runtime(self, conversation_id: str) -> DockerSkillRuntime:
        return DockerSkillRuntime(conversation_id=conversation_id, **self.options)

    def shell(self, conversation_id: str, command: str) -> str:
        """``command``'s stdout in the conversation's workspace (exit code 0 required)."""
        with self.runtime(conversation_id) as runtime:
            result = runtime.execute(SkillExecutionRequest(command=command))
        assert result.exit_code == 0, result.stderr
        return result.stdout

    def destroy(self, conversation_id: str) -> None:
        with self.runtime(conversation_id) as runtime:
            runtime.destroy_conversation()


@pytest.fixture
def backend(docker_engine: Engine, tmp_path: Path) -> DockerBackend:
    return DockerBackend(
        {
            "docker_host": docker_engine.host,
            "image": os.environ[IMAGE_VARIABLE],
            "conversation_store": f"sqlite:///{tmp_path / 'conversations.db'}",
            "labels": {TEST_LABEL: "agents-sdk"},
        }
    )


def _conversation(name: str) -> str:
    return f"oa-{name}-{uuid.uuid4().hex[:8]}"


def test_a_sandbox_agent_prepares_and_runs_a_skill_in_the_container(
    backend: DockerBackend, tmp_path: Path
) -> None:
    conversation = _conversation("run")
    model = ScriptedModel(scripted.skill_steps())
    try:
        result = asyncio.run(
            Runner.run(
                scripted.agent(model),
                "How many words has the sample?",
                run_config=scripted.run_config(backend.client(), conversation),
            )
        )
        assert result.final_output == "The sample has 78 words."
        loaded, report = scripted.outputs(result)
        assert "'status': 'loaded'" in loaded
        assert "'path': 'skills/text-stats-" in loaded  # relative to the conversation workspace
        assert "words: 78" in report
        assert "Process exited with code 0" in report

        first = model.calls[0]
        assert "text-stats" in (first.system_instructions or "")
        assert {"load_skill", "exec_command"} <= {tool.name for tool in first.tools}
        model.assert_complete()

        # The files are in the container's workspace (read through another runtime object on
        # the same conversation), and nothing of them on this side.
        assert "words: 78" in backend.shell(conversation, "cat notes/report.txt")
        prepared = backend.shell(conversation, "ls skills").split()
        assert len(prepared) == 1
        assert prepared[0].startswith("text-stats-")
        assert backend.shell(conversation, f"cat skills/{prepared[0]}/build/stopwords.txt")
        assert (
            backend.shell(conversation, "pwd").strip() == f"/workspace/conversations/{conversation}"
        )
        assert not list(tmp_path.rglob("report.txt"))
        assert not (Path.cwd() / "notes" / "report.txt").exists()
    finally:
        backend.destroy(conversation)


BROKEN = """---
name: broken
description: A skill whose declared bootstrap fails.
metadata:
  skillruntime:
    bootstrap:
      - echo bootstrap-boom >&2; exit 3
---
# Broken
"""


def _skills_with_a_broken_one(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    shutil.copytree(scripted.EXAMPLE_SKILLS, root)
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text(BROKEN)
    return root


def test_load_skill_failures_are_tool_results_and_the_run_goes_on(
    backend: DockerBackend, tmp_path: Path
) -> None:
    """A failing bootstrap, a name that is not configured and malformed arguments each answer
    ``load_skill`` with an error result; the model then loads a working skill and uses it."""
    conversation = _conversation("load-errors")
    model = ScriptedModel(
        [
            [function_call("load_skill", {"skill_name": "broken"}, call_id="broken")],
            [function_call("load_skill", {"skill_name": "no-such-skill"}, call_id="missing")],
            [function_call("load_skill", {"name": "text-stats"}, call_id="malformed")],
            *scripted.skill_steps(),
        ]
    )
    try:
        result = asyncio.run(
            Runner.run(
                scripted.agent(model, _skills_with_a_broken_one(tmp_path)),
                "How many words has the sample?",
                run_config=scripted.run_config(backend.client(), conversation),
            )
        )
        assert result.final_output == "The sample has 78 words."
        broken, missing, malformed, loaded, report = scripted.outputs(result)
        assert "'status': 'error'" in broken
        assert "preparing skill 'broken' in the docker runtime failed" in broken
        assert "exit code 3" in broken
        assert "bootstrap-boom" in broken
        assert "'status': 'error'" in missing
        assert "Skill not found: no-such-skill" in missing
        assert "Available skills: broken, csv-report, text-stats" in missing
        assert "'status': 'error'" in malformed
        assert "skill_name" in malformed
        assert "'status': 'loaded'" in loaded
        assert "words: 78" in report
        model.assert_complete()
    finally:
        backend.destroy(conversation)
