"""One exception hierarchy for everything skillruntime raises.

Every error derives from :class:`SkillRuntimeError`. Messages say what failed and what to do;
they never contain environment values, API keys, tokens or file bodies.
"""

from __future__ import annotations

import errno
from typing import ClassVar

__all__ = [
    "ArtifactIntegrityError",
    "ExecutionTransportError",
    "FileTooLargeError",
    "InvalidPathError",
    "NotADirectoryFileError",
    "NotRegularFileError",
    "PluginNotFoundError",
    "RuntimeClosedError",
    "RuntimeFileError",
    "RuntimeFileNotFoundError",
    "RuntimeIsADirectoryError",
    "RuntimePermissionError",
    "SkillPrepareError",
    "SkillRuntimeError",
    "SkillValidationError",
    "StoreConflictError",
    "WorkspaceEscapeError",
    "file_error_code",
    "file_error_from_os_error",
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
    """A file operation in a runtime failed; ``path`` is the runtime path involved.

    ``kind`` is a stable, framework-neutral name of the failure, fixed per class (see
    :func:`file_error_code`), so adapters map errors from the type alone. (It is not called
    ``code``: backend errors carry their server's own error code under that name.)
    """

    kind: ClassVar[str] = "file_error"

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class RuntimeFileNotFoundError(RuntimeFileError, FileNotFoundError):
    """The runtime path does not exist (or is not the kind of entry the operation needs)."""

    kind: ClassVar[str] = "file_not_found"


class RuntimeIsADirectoryError(RuntimeFileNotFoundError, IsADirectoryError):
    """The operation needs a file but the path is a directory (a read, a download, an edit)."""

    kind: ClassVar[str] = "is_directory"


class NotRegularFileError(RuntimeFileNotFoundError):
    """The path is a FIFO, socket or device: refused without opening it for reading or writing."""

    kind: ClassVar[str] = "invalid_path"


class NotADirectoryFileError(RuntimeFileError, NotADirectoryError):
    """A component of the path that must be a directory (a parent, a listed path) is not one."""

    kind: ClassVar[str] = "invalid_path"


class RuntimePermissionError(RuntimeFileError, PermissionError):
    """The runtime's user may not read, write or delete the path."""

    kind: ClassVar[str] = "permission_denied"


class InvalidPathError(RuntimeFileError, ValueError):
    """The path cannot be resolved: a symlink loop, too long, too deep, or a NUL byte."""

    kind: ClassVar[str] = "invalid_path"


class FileTooLargeError(RuntimeFileError):
    """A read went over its ``max_bytes`` limit; nothing beyond the limit was kept."""

    kind: ClassVar[str] = "file_too_large"

    def __init__(self, message: str, *, path: str | None = None, limit: int = 0) -> None:
        super().__init__(message, path=path)
        self.limit = limit


class WorkspaceEscapeError(SkillRuntimeError, ValueError):
    """A path leaves the conversation workspace; raised before any backend call is made."""

    kind: ClassVar[str] = "invalid_path"


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


def file_error_code(error: BaseException) -> str | None:
    """The stable code of a file-related error (``file_not_found``, ``is_directory``,
    ``permission_denied``, ``invalid_path``, ``file_too_large``, ``file_error``), or ``None`` when
    ``error`` is not one. Derived from the type alone, never from message text."""
    if isinstance(error, RuntimeFileError | WorkspaceEscapeError):
        return error.kind
    return None


_ERRNO_CLASSES: dict[int, type[RuntimeFileError]] = {
    errno.ENOENT: RuntimeFileNotFoundError,
    errno.EISDIR: RuntimeIsADirectoryError,
    errno.ENOTDIR: NotADirectoryFileError,
    errno.EACCES: RuntimePermissionError,
    errno.EPERM: RuntimePermissionError,
    errno.EROFS: RuntimePermissionError,
    errno.ELOOP: InvalidPathError,
    errno.ENAMETOOLONG: InvalidPathError,
}


def file_error_from_os_error(
    error: OSError, path: str, *, operation: str = "access"
) -> RuntimeFileError:
    """The typed :class:`RuntimeFileError` for an ``OSError`` raised while working on ``path``.

    The class follows ``error.errno`` (``ENOENT`` → not found, ``EISDIR`` → is a directory,
    ``ENOTDIR`` → not a directory, ``EACCES``/``EPERM``/``EROFS`` → permission denied,
    ``ELOOP``/``ENAMETOOLONG`` → invalid path; anything else the base class). The message names
    the operation, the runtime path and the system's reason, never file content. Callers raise it
    ``from error``.
    """
    cls = _ERRNO_CLASSES.get(error.errno or 0, RuntimeFileError)
    reason = error.strerror or type(error).__name__
    return cls(f"Cannot {operation} {path}: {reason}", path=path)
