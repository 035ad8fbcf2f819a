"""One exception hierarchy for everything skillruntime raises.

Every error derives from :class:`SkillRuntimeError`. Messages say what failed and what to do;
they never contain environment values, API keys, tokens or file bodies.
"""

from __future__ import annotations

__all__ = [
    "ArtifactIntegrityError",
    "ExecutionTransportError",
    "FileTooLargeError",
    "PluginNotFoundError",
    "RuntimeClosedError",
    "RuntimeFileError",
    "RuntimeFileNotFoundError",
    "SkillPrepareError",
    "SkillRuntimeError",
    "SkillValidationError",
    "StoreConflictError",
    "WorkspaceEscapeError",
]


class SkillRuntimeError(Exception):
    """Base class of every error raised by skillruntime."""


class SkillValidationError(SkillRuntimeError, ValueError):
    """A ``SKILL.md`` or a skill directory breaks the Agent Skills rules (strict mode)."""


class SkillPrepareError(SkillRuntimeError):
    """Preparing a skill failed: its copy/upload or one of its bootstrap commands.

    ``exit_code`` is the failing bootstrap command's exit code (``None`` when the failure was not a
    command) and ``output_tail`` the last part of its combined output.
    """

    def __init__(
        self,
        message: str,
        *,
        skill_name: str | None = None,
        exit_code: int | None = None,
        output_tail: str = "",
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.skill_name = skill_name
        self.exit_code = exit_code
        self.output_tail = output_tail
        self.timed_out = timed_out


class ExecutionTransportError(SkillRuntimeError):
    """A command could not be run or its result could not be obtained (not a non-zero exit)."""


class RuntimeFileError(SkillRuntimeError):
    """A file operation in a runtime failed; ``path`` is the runtime path involved."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class RuntimeFileNotFoundError(RuntimeFileError, FileNotFoundError):
    """The runtime path does not exist (or is not the kind of entry the operation needs)."""


class FileTooLargeError(RuntimeFileError):
    """A read went over its ``max_bytes`` limit; nothing beyond the limit was kept."""

    def __init__(self, message: str, *, path: str | None = None, limit: int = 0) -> None:
        super().__init__(message, path=path)
        self.limit = limit


class WorkspaceEscapeError(SkillRuntimeError, ValueError):
    """A path leaves the conversation workspace; raised before any backend call is made."""


class RuntimeClosedError(SkillRuntimeError):
    """The runtime was closed; no operation is possible on it any more."""


class PluginNotFoundError(SkillRuntimeError, LookupError):
    """No installed plugin provides the requested runtime or store."""


class StoreConflictError(SkillRuntimeError):
    """A store refused a change because another writer changed the same entry first."""


class ArtifactIntegrityError(SkillRuntimeError):
    """A skill artifact failed verification; ``code`` is stable, e.g. ``SKILL_REVISION_CHANGED``."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
