"""One exception hierarchy for everything skillruntime raises.

Every error derives from :class:`SkillRuntimeError`. Messages say what failed and what to do;
they never contain environment values, API keys, tokens or file bodies. The classes of core,
each with its further standard bases in parentheses::

    SkillRuntimeError
    ├── SkillValidationError (ValueError)
    │   └── InvalidSkillError
    ├── SkillPrepareError
    ├── ExecutionTransportError
    ├── RuntimeFileError
    │   ├── RuntimeFileNotFoundError (FileNotFoundError)
    │   │   ├── RuntimeIsADirectoryError (IsADirectoryError)
    │   │   └── NotRegularFileError
    │   ├── NotADirectoryFileError (NotADirectoryError)
    │   ├── RuntimePermissionError (PermissionError)
    │   ├── InvalidPathError (ValueError)
    │   └── FileTooLargeError
    ├── WorkspaceEscapeError (ValueError)
    ├── RuntimeClosedError
    ├── PluginNotFoundError (LookupError)
    ├── RuntimeOptionsError (ValueError)
    ├── StoreConflictError
    ├── ArtifactIntegrityError
    ├── ArtifactStoreError
    │   ├── ArtifactNotFoundError (LookupError)
    │   ├── ArtifactExistsError (StoreConflictError)
    │   ├── ArtifactInUseError (StoreConflictError)
    │   └── PackageRejectedError (ValueError)
    ├── ConversationStoreError
    ├── ConversationLeaseError
    │   ├── LeaseTimeoutError
    │   ├── LeaseLostError
    │   └── LeaseFencingError
    └── SnapshotError
        ├── SnapshotManifestError
        │   ├── SnapshotPathError
        │   └── SymlinkEscapeError
        ├── SnapshotListingError
        ├── SnapshotStoreError
        │   ├── SnapshotNotFoundError (LookupError)
        │   └── SnapshotIntegrityError
        ├── WorkspaceSnapshotError
        └── WorkspaceRestoreError
    InvalidPatternError (ValueError): a search pattern that is not valid RE2 syntax

The backends' own errors live in the ``errors`` module of their distribution, each under one of
these (e.g. :mod:`skillruntime.opensandbox.errors`). Older module paths of the classes defined
here (``skillruntime.core.conversations.spi``, ``skillruntime.core.artifacts.spi``,
``skillruntime.core.plugins.registry``, ...) still export them.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

__all__ = [
    "ArtifactExistsError",
    "ArtifactInUseError",
    "ArtifactIntegrityError",
    "ArtifactNotFoundError",
    "ArtifactStoreError",
    "ConversationLeaseError",
    "ConversationStoreError",
    "ExecutionTransportError",
    "FileTooLargeError",
    "InvalidPathError",
    "InvalidPatternError",
    "InvalidSkillError",
    "LeaseFencingError",
    "LeaseLostError",
    "LeaseTimeoutError",
    "NotADirectoryFileError",
    "NotRegularFileError",
    "PackageRejectedError",
    "PluginNotFoundError",
    "RuntimeClosedError",
    "RuntimeFileError",
    "RuntimeFileNotFoundError",
    "RuntimeIsADirectoryError",
    "RuntimeOptionsError",
    "RuntimePermissionError",
    "SkillPrepareError",
    "SkillProblem",
    "SkillRuntimeError",
    "SkillValidationError",
    "SnapshotError",
    "SnapshotIntegrityError",
    "SnapshotListingError",
    "SnapshotManifestError",
    "SnapshotNotFoundError",
    "SnapshotPathError",
    "SnapshotStoreError",
    "StoreConflictError",
    "SymlinkEscapeError",
    "WorkspaceEscapeError",
    "WorkspaceRestoreError",
    "WorkspaceSnapshotError",
    "file_error_code",
    "file_error_from_os_error",
    "printable",
]


class SkillRuntimeError(Exception):
    """Base class of every error raised by skillruntime."""


class SkillValidationError(SkillRuntimeError, ValueError):
    """A ``SKILL.md`` or a skill directory breaks the Agent Skills rules (strict mode)."""


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """One problem found in a skill: ``level`` ``"error"`` or ``"warning"``, a message saying what
    is wrong and how to fix it, and the host path (usually the ``SKILL.md``) it concerns."""

    level: Literal["error", "warning"]
    message: str
    path: str

    def __str__(self) -> str:
        return f"{self.path}: {self.level}: {self.message}"


class InvalidSkillError(SkillValidationError):
    """A skill has errors and strict mode was requested; ``problems`` lists all that was found."""

    def __init__(self, problems: Sequence[SkillProblem]) -> None:
        self.problems = tuple(problems)
        subject = self.problems[0].path if self.problems else "skill"
        lines = "\n".join(f"  - {p.level}: {p.message}" for p in self.problems)
        super().__init__(f"Invalid skill {subject}:\n{lines}")


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


class RuntimeOptionsError(SkillRuntimeError, ValueError):
    """Options given to :func:`~skillruntime.core.plugins.registry.create_runtime` are unknown or
    invalid (values never shown)."""


class StoreConflictError(SkillRuntimeError):
    """A store refused a change because another writer changed the same entry first."""


class ArtifactIntegrityError(SkillRuntimeError):
    """A skill artifact failed verification; ``code`` is stable, e.g. ``SKILL_REVISION_CHANGED``."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


class ArtifactStoreError(SkillRuntimeError):
    """An artifact store operation failed (I/O, configuration or a missing optional extra)."""


class ArtifactNotFoundError(ArtifactStoreError, LookupError):
    """The artifact is not installed in the store (or its entry is not a valid skill)."""


class ArtifactExistsError(ArtifactStoreError, StoreConflictError):
    """The version is already installed: versions are immutable, install a new version instead."""


class ArtifactInUseError(ArtifactStoreError, StoreConflictError):
    """The artifact is held by a lease in this process; delete it after the lease ends."""


class PackageRejectedError(ArtifactStoreError, ValueError):
    """A skill package failed validation; ``reason`` is a stable code such as ``ESCAPE``.

    Codes: ``NOT_A_ZIP``, ``ESCAPE``, ``SYMLINK``, ``SPECIAL_FILE``, ``DUPLICATE``,
    ``TOO_MANY_MEMBERS``, ``TOO_LARGE``, ``COMPRESSION_RATIO``, ``SKILL_MD``, ``NAME_MISMATCH``,
    ``CORRUPT``, ``NAME_TOO_LONG``.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(f"[{reason}] {message}")
        self.reason = reason


class ConversationStoreError(SkillRuntimeError):
    """The store could not be reached or answered something unusable (no secrets in the text)."""


class ConversationLeaseError(SkillRuntimeError):
    """A conversation lease could not be taken or was lost."""


class LeaseTimeoutError(ConversationLeaseError):
    """Another owner held the conversation's lease for the whole wait bound."""


class LeaseLostError(ConversationLeaseError):
    """The lease was taken over or could not be renewed in time; stop writing the conversation."""


class LeaseFencingError(ConversationLeaseError):
    """A lease was taken over from a holder that did not release it, and the commands that holder
    left running could not be stopped (the fence command failed or timed out): the lease is not
    used, and expires so that the next taker tries again (docs/conversation-stores.md,
    "Nodes dying")."""


class SnapshotError(SkillRuntimeError):
    """A workspace snapshot could not be planned, stored or read (no file content in the text).

    The snapshot errors are not :class:`ValueError`: the manifest model raises them from its
    validators, and pydantic passes any other exception through unchanged."""


class SnapshotManifestError(SnapshotError):
    """A snapshot manifest is malformed: wrong version, a duplicate path, an entry whose fields do
    not fit its kind, a path whose parent is not a directory of the manifest."""


class SnapshotPathError(SnapshotManifestError):
    """A manifest path is not relative, POSIX and normalized (absolute, ``..``, ``.``, empty
    components, a trailing slash or a NUL)."""


class SymlinkEscapeError(SnapshotManifestError):
    """A symlink's target leaves the workspace (absolute, or resolving above the workspace root
    through ``..`` and the manifest's other links): such links are refused, never stored."""


class SnapshotListingError(SnapshotError):
    """A workspace listing could not be parsed: truncated, malformed, over a limit, or holding an
    entry the parser cannot classify (the parser fails closed)."""


class SnapshotStoreError(SnapshotError):
    """A snapshot store operation failed (I/O, configuration, timeout, a missing extra)."""


class SnapshotNotFoundError(SnapshotStoreError, LookupError):
    """The snapshot or object is not in the store."""


class SnapshotIntegrityError(SnapshotStoreError):
    """A stored object or manifest does not match its digest; ``code`` is stable
    (``DIGEST_MISMATCH``, ``SIZE_MISMATCH``, ``MANIFEST_MISMATCH``). Nothing of it was returned."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


class WorkspaceSnapshotError(SnapshotError):
    """A runtime's workspace could not be snapshotted: the listing command failed or timed out,
    or a file changed while it was read (its bytes no longer match the listing's digest)."""


class WorkspaceRestoreError(SnapshotError):
    """A restore into a runtime's workspace could not finish.

    ``done`` names the steps that completed before the failure, in order (empty: the workspace
    was not touched; the objects are fetched and verified before anything is changed), and
    ``changed`` tells whether the workspace was modified at all."""

    def __init__(self, message: str, *, done: tuple[str, ...] = ()) -> None:
        steps = ", ".join(done) if done else "nothing (the workspace is unchanged)"
        super().__init__(f"{message}; done before the failure: {steps}")
        self.done = done
        self.changed = bool(done)


class InvalidPatternError(ValueError):
    """The pattern is not valid RE2 syntax (or uses a feature RE2 does not have)."""


_SHORT_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` (a path, a name or any other text a sandbox or a model supplied) rendered for an
    error message or a log line: the result always encodes as UTF-8 strictly and holds no
    control character, so printing it to a UTF-8 stream, a log file or a JSON tool result
    neither fails nor lets the text forge lines or terminal sequences.

    Printable text without a backslash is returned unchanged. Otherwise every backslash is
    doubled, ``\\t``, ``\\n`` and ``\\r`` are written as such, a byte that is not UTF-8 (kept as a
    lone surrogate U+DC80..U+DCFF by ``surrogateescape``, docs/custom-runtime.md) becomes
    ``\\xNN`` with NN at least 80, and any other character that is not printable (controls,
    other lone surrogates, format and separator characters) becomes ``\\xNN`` (below U+0080),
    ``\\uNNNN`` or ``\\UNNNNNNNN``; so distinct texts render distinctly. Exceptions keep the
    original value in their structured attributes (``RuntimeFileError.path``); only their message
    text goes through this function.
    """
    if text.isprintable() and "\\" not in text:
        return text
    parts: list[str] = []
    for char in text:
        code = ord(char)
        if char in _SHORT_ESCAPES:
            parts.append(_SHORT_ESCAPES[char])
        elif char.isprintable():
            parts.append(char)
        elif 0xDC80 <= code <= 0xDCFF:
            parts.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x80:
            parts.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            parts.append(f"\\u{code:04x}")
        else:
            parts.append(f"\\U{code:08x}")
    return "".join(parts)


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
    return cls(f"Cannot {operation} {printable(path)}: {reason}", path=path)
