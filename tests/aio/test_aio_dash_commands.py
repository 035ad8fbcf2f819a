"""A command that starts with ``-`` is a command, not the sandbox shell's options, on both
command APIs (the ``/v1/shell`` wrapper runs ``<shell> -c -- COMMAND``; ``/v1/bash`` evaluates
the command)."""

from __future__ import annotations

import uuid

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.models import SkillExecutionRequest


@pytest.mark.parametrize("api", ["aio_bash", "aio_shell"])
def test_a_command_starting_with_a_dash_runs_as_a_command(
    api: str, request: pytest.FixtureRequest
) -> None:
    double: AioDouble = request.getfixturevalue(api)
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"dash-{uuid.uuid4().hex[:8]}",
        conversations_root="/tmp/dash-conversations",
    ) as runtime:
        result = runtime.execute(SkillExecutionRequest(command="--version", timeout_seconds=20))
        assert result.exit_code == 127
        assert "--version" in result.stderr
        assert "GNU bash" not in result.stdout
        echoed = runtime.execute(SkillExecutionRequest(command="-x 2>/dev/null; echo after"))
        assert echoed.stdout == "after\n"
