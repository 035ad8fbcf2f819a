"""The rules both AIO runtimes apply around their I/O, free of it.

:class:`~skillruntime.aio.runtime.AioSandboxSkillRuntime` and
:class:`~skillruntime.aio.async_runtime.AsyncAioSkillRuntime` (one generated from the other) take
from here how a remote root and a command's working directory are normalised, which commands
unpack a skill archive and kill a marked command, and how a wrapper's outcome becomes an SPI
result or a prepare error.
"""

from __future__ import annotations

import posixpath
import time

from skillruntime.core.errors import ExecutionTransportError, SkillPrepareError, printable
from skillruntime.core.models import Skill, SkillExecutionRequest, SkillExecutionResult
from skillruntime.core.runtime.bridge import (
    kill_marked_command,
    marked_environment,
)

from .command_plans import CommandSpec
from .errors import AioSandboxError
from .script import WrapperOutcome

__all__ = [
    "KILL_TIMEOUT",
    "PREPARE_TIMEOUT",
    "checked_remote_root",
    "command_cwd",
    "execution_result",
    "kill_spec",
    "marked_environment",
    "unpack_error",
    "unpack_failure",
    "unpack_spec",
    "upload_failure",
]

PREPARE_TIMEOUT = 600.0
"""Seconds the unpack command of a skill archive may take."""

KILL_TIMEOUT = 30.0
"""Seconds the kill sweep of a cancelled or closed command may take."""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def checked_remote_root(remote_root: str) -> str:
    """``remote_root`` normalised; it must be absolute and not ``/``."""
    if not remote_root.startswith("/") or remote_root.rstrip("/") == "":
        raise ValueError("remote_root must be an absolute path on the service other than /")
    return posixpath.normpath(remote_root)


def command_cwd(default_directory: str, working_directory: str) -> str:
    """The absolute working directory of a command on the service."""
    return posixpath.normpath(posixpath.join(default_directory, working_directory))


def execution_result(
    outcome: WrapperOutcome, request: SkillExecutionRequest, cwd: str, started: float
) -> SkillExecutionResult:
    """The SPI result of a wrapper run (``started``: its ``time.monotonic()``); a missing
    working directory raises ``ExecutionTransportError``."""
    if outcome.missing_cwd:
        raise ExecutionTransportError(f"Working directory does not exist: {printable(cwd)}")
    cap = request.max_output_bytes
    return SkillExecutionResult(
        exit_code=outcome.exit_code,
        stdout=_decode(outcome.stdout),
        stderr=_decode(outcome.stderr),
        timed_out=outcome.timed_out,
        duration_seconds=time.monotonic() - started,
        stdout_truncated=outcome.stdout_size > cap,
        stderr_truncated=outcome.stderr_size > cap,
    )


def kill_spec(token: str) -> CommandSpec:
    """The command that kills every process of the command marked ``token`` (see
    :func:`~skillruntime.core.runtime.bridge.kill_marked_command`)."""
    return CommandSpec(
        command=kill_marked_command(token), cwd="/", environment={}, timeout=KILL_TIMEOUT, cap=4096
    )


def upload_failure(skill: Skill, exc: AioSandboxError) -> SkillPrepareError:
    """The error of a skill archive the service refused."""
    return SkillPrepareError(
        f"Uploading skill '{skill.name}' to the AIO Sandbox failed: {exc}", skill_name=skill.name
    )


def unpack_spec(command: str) -> CommandSpec:
    """The command that unpacks a staged skill archive (see :func:`.archive.unpack_command`)."""
    return CommandSpec(
        command=command, cwd="/", environment={}, timeout=PREPARE_TIMEOUT, cap=64 * 1024
    )


def unpack_error(skill: Skill, exc: ExecutionTransportError) -> SkillPrepareError:
    """The error of an unpack command that could not run."""
    return SkillPrepareError(
        f"Unpacking skill '{skill.name}' on the AIO Sandbox failed: {exc}", skill_name=skill.name
    )


def unpack_failure(skill: Skill, outcome: WrapperOutcome) -> SkillPrepareError | None:
    """The error of an unpack command that failed; ``None`` when it succeeded."""
    if outcome.exit_code == 0 and not outcome.timed_out:
        return None
    detail = _decode(outcome.stderr).strip()[-500:]
    return SkillPrepareError(
        f"Unpacking skill '{skill.name}' on the AIO Sandbox failed "
        f"(exit code {outcome.exit_code}): {detail}",
        skill_name=skill.name,
        exit_code=outcome.exit_code,
        output_tail=detail,
        timed_out=outcome.timed_out,
    )
