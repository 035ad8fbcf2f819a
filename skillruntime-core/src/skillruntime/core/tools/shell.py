"""The ``bash`` tool: one shell command through the runtime's ``execute``."""

from __future__ import annotations

from ..models import SkillExecutionRequest
from .arguments import BashArguments
from .base import Guard, SkillTool
from .context import ToolContext, truncate

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_OUTPUT_CHARS",
    "MAX_TIMEOUT_SECONDS",
    "bash_tool",
]

DEFAULT_TIMEOUT_SECONDS = 120.0
MAX_TIMEOUT_SECONDS = 600.0
MAX_OUTPUT_CHARS = 30_000

DESCRIPTION = (
    "Executes a shell command in the configured skill runtime (bash -c, empty stdin). Commands "
    "never bypass the runtime to execute on the host. The default timeout is 120 seconds and the "
    "maximum is 600 seconds. The result is stdout, then 'STDERR:' and stderr when there is any, "
    "then 'Exit code: N' for a non-zero exit or 'Command timed out'; output beyond 30000 "
    "characters is cut."
)


def format_result(stdout: str, stderr: str, exit_code: int, timed_out: bool) -> str:
    """The ``bash`` result text (see :data:`DESCRIPTION`)."""
    parts: list[str] = []
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if stderr:
        parts.append("STDERR:\n" + stderr.rstrip("\n"))
    if timed_out:
        parts.append("Command timed out")
    elif exit_code != 0:
        parts.append(f"Exit code: {exit_code}")
    return truncate("\n".join(parts), MAX_OUTPUT_CHARS)


def bash_tool(context: ToolContext, guard: Guard | None = None) -> SkillTool:
    """Build the ``bash`` tool over ``context``."""

    def run(arguments: BashArguments) -> str:
        timeout = min(arguments.timeout_seconds or DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
        working_directory = (
            context.resolve(arguments.working_directory) if arguments.working_directory else None
        )
        result = context.runtime.execute(
            SkillExecutionRequest(
                command=arguments.command,
                working_directory=working_directory,
                timeout_seconds=timeout,
            )
        )
        return format_result(result.stdout, result.stderr, result.exit_code, result.timed_out)

    return SkillTool(
        "bash",
        DESCRIPTION,
        BashArguments,
        run,
        guard=guard,
        error_prefix=f"running the command in the {context.name} runtime failed",
    )
