"""A ``SandboxAgent`` run through the SDK's ``Runner`` on the local runtime, the OpenSandbox
double and the AIO double: the prepared-skills capability lists the skills, ``load_skill``
prepares one in the runtime, ``exec_command`` runs its script there, and the files land in the
conversation's workspace of that backend (not on the host's SDK side)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from agents import Runner
from agents.testing import ScriptedModel, function_call

import agents_sdk_runs as scripted
from agents_sdk_backends import Backend, aio_backend, local_backend, opensandbox_backend
from doubles.aio import AioDouble
from doubles.opensandbox.harness import OpenSandboxDouble


@pytest.fixture(params=["local", "opensandbox", "aio"])
def backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Backend:
    if request.param == "local":
        return local_backend(tmp_path)
    if request.param == "opensandbox":
        double: OpenSandboxDouble = request.getfixturevalue("opensandbox_double")
        return opensandbox_backend(double, tmp_path)
    aio: AioDouble = request.getfixturevalue("aio_double")
    return aio_backend(aio)


def test_a_sandbox_agent_prepares_and_runs_a_skill_in_the_runtime(backend: Backend) -> None:
    conversation = f"oa-run-{backend.name}"
    model = ScriptedModel(scripted.skill_steps())
    client = backend.client()
    try:
        result = asyncio.run(
            Runner.run(
                scripted.agent(model),
                "How many words has the sample?",
                run_config=scripted.run_config(client, conversation),
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

        workspace = backend.host_workspace(conversation)
        assert "words: 78" in (workspace / "notes" / "report.txt").read_text()
        prepared = [p.name for p in (workspace / "skills").iterdir() if p.is_dir()]
        assert len(prepared) == 1
        assert prepared[0].startswith("text-stats-")
        assert (workspace / "skills" / prepared[0] / "build" / "stopwords.txt").is_file()
    finally:
        backend.cleanup(conversation)


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
    backend: Backend, tmp_path: Path
) -> None:
    """A failing bootstrap, a name that is not configured and malformed arguments each answer
    ``load_skill`` with an error result; the model then loads a working skill and uses it."""
    conversation = f"oa-load-errors-{backend.name}"
    model = ScriptedModel(
        [
            [function_call("load_skill", {"skill_name": "broken"}, call_id="broken")],
            [function_call("load_skill", {"skill_name": "no-such-skill"}, call_id="missing")],
            [function_call("load_skill", {"name": "text-stats"}, call_id="malformed")],
            *scripted.skill_steps(),
        ]
    )
    client = backend.client()
    try:
        result = asyncio.run(
            Runner.run(
                scripted.agent(model, _skills_with_a_broken_one(tmp_path)),
                "How many words has the sample?",
                run_config=scripted.run_config(client, conversation),
            )
        )
        assert result.final_output == "The sample has 78 words."
        broken, missing, malformed, loaded, report = scripted.outputs(result)
        assert "'status': 'error'" in broken
        assert f"preparing skill 'broken' in the {backend.name} runtime failed" in broken
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
        backend.cleanup(conversation)
