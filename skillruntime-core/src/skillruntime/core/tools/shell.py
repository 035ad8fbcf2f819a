"""What the ``bash`` tool says: its description, timeouts and result text (the tool is built by
:mod:`~skillruntime.core.tools.async_runtime_tools` and its generated sync face)."""

from __future__ import annotations

from .._moved import moved_names
from .context import truncate

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_OUTPUT_CHARS",
    "MAX_TIMEOUT_SECONDS",
    "format_result",
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


__getattr__ = moved_names(
    __name__, dict.fromkeys(("bash_tool",), "skillruntime.core.tools.runtime_tools")
)
"""The tool builders that moved to :mod:`skillruntime.core.tools.runtime_tools`, served with a
:class:`DeprecationWarning`."""
