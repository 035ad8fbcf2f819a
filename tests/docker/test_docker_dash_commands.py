"""A command that starts with ``-`` is a command, not the container shell's options: the wrapper
runs ``<shell> -c -- COMMAND`` (``bash -c --version`` printed bash's version and exited 0)."""

from __future__ import annotations

import docker_fixtures
from docker_fixtures import IMAGE, suite_labels
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.docker import DockerSkillRuntime

docker_run = docker_fixtures.docker_run


def test_a_command_starting_with_a_dash_runs_as_a_command(docker_run: str) -> None:
    with DockerSkillRuntime(image=IMAGE, labels=suite_labels(docker_run)) as runtime:
        result = runtime.execute(SkillExecutionRequest(command="--version", timeout_seconds=30))
        assert result.exit_code == 127
        assert "--version" in result.stderr
        assert "GNU bash" not in result.stdout
        echoed = runtime.execute(SkillExecutionRequest(command="-x 2>/dev/null; echo after"))
        assert echoed.stdout == "after\n"
