"""A command that starts with ``-`` runs as a command, never as options of the shell.

The local runtime once ran ``<shell> -c <command>``: ``--version`` printed bash's version with
exit status 0, and ``-x; echo ran`` was refused as an invalid option cluster. It now runs
``<shell> -c -- <command>``, with bash and with a POSIX ``sh`` alike, sync and async.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

SHELLS = [name for name in ("bash", "sh") if shutil.which(name)]


def _request(command: str) -> SkillExecutionRequest:
    return SkillExecutionRequest(command=command, timeout_seconds=30)


def test_the_argv_ends_the_shell_options_before_the_command() -> None:
    from skillruntime.local.runtime import shell_argv

    assert shell_argv("/bin/bash", "--version") == ["/bin/bash", "-c", "--", "--version"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_dashed_command_is_looked_up_as_a_command(tmp_path: Path, shell: str) -> None:
    with LocalSkillRuntime(work_root=tmp_path, shell=shutil.which(shell)) as runtime:
        version = runtime.execute(_request("--version"))
        chained = runtime.execute(_request("-x; echo ran"))
        plain = runtime.execute(_request('echo "$0" "$#"'))

    assert version.exit_code == 127
    assert "--version" in version.stderr
    assert "not found" in version.stderr
    assert "GNU bash" not in version.stdout
    assert chained.exit_code == 0, chained.stderr
    assert chained.stdout == "ran\n"
    assert "invalid option" not in chained.stderr
    # `--` takes no argument slot: $0 is still the shell, and there are no positional ones
    assert plain.stdout.split()[1] == "0"
    assert "--" not in plain.stdout.split()[0]


def test_a_dashed_command_runs_as_a_command_on_the_async_runtime(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, str, str]:
        async with AsyncLocalSkillRuntime(work_root=tmp_path) as runtime:
            result = await runtime.execute(_request("--help; echo after"))
        return result.exit_code, result.stdout, result.stderr

    code, out, err = asyncio.run(scenario())

    assert code == 0, err
    assert out == "after\n"
    assert "--help" in err
    assert "not found" in err
