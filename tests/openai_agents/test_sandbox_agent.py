"""A ``SandboxAgent`` run through the SDK's ``Runner`` on the local runtime, the OpenSandbox
double and the AIO double: the prepared-skills capability lists the skills, ``load_skill``
prepares one in the runtime, ``exec_command`` runs its script there, and the files land in the
conversation's workspace of that backend (not on the host's SDK side)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agents import Runner
from agents.testing import ScriptedModel

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
