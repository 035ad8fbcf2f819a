"""skillruntime core: the SkillRuntime SPI, its models, skill files and conversation workspaces."""

from typing import TYPE_CHECKING

from . import _moved
from ._lazy import lazy_attributes
from ._version import __version__

if TYPE_CHECKING:
    from .async_filesystem import AsyncSkillRuntimeFileSystem
    from .async_runtime import AsyncBaseSkillRuntime, AsyncSkillRuntime
    from .bridge import to_async, to_sync
    from .errors import (
        ArtifactIntegrityError,
        ExecutionTransportError,
        FileTooLargeError,
        InvalidPathError,
        NotADirectoryFileError,
        NotRegularFileError,
        PluginNotFoundError,
        RuntimeClosedError,
        RuntimeFileError,
        RuntimeFileNotFoundError,
        RuntimeIsADirectoryError,
        RuntimePermissionError,
        SkillPrepareError,
        SkillRuntimeError,
        SkillValidationError,
        StoreConflictError,
        WorkspaceEscapeError,
        file_error_code,
        file_error_from_os_error,
    )
    from .filesystem import SkillRuntimeFileSystem
    from .models import (
        BootstrapCommand,
        FileInfo,
        Skill,
        SkillExecutionRequest,
        SkillExecutionResult,
        SkillPreparationRequest,
        SkillRuntimeConfig,
    )
    from .runtime import BaseSkillRuntime, SkillRuntime
    from .workspace import ConversationWorkspace, ScopedFileSystem

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "AsyncSkillRuntimeFileSystem": ".async_filesystem",
        "AsyncBaseSkillRuntime": ".async_runtime",
        "AsyncSkillRuntime": ".async_runtime",
        "to_async": ".bridge",
        "to_sync": ".bridge",
        "ArtifactIntegrityError": ".errors",
        "ExecutionTransportError": ".errors",
        "FileTooLargeError": ".errors",
        "InvalidPathError": ".errors",
        "NotADirectoryFileError": ".errors",
        "NotRegularFileError": ".errors",
        "PluginNotFoundError": ".errors",
        "RuntimeClosedError": ".errors",
        "RuntimeFileError": ".errors",
        "RuntimeFileNotFoundError": ".errors",
        "RuntimeIsADirectoryError": ".errors",
        "RuntimePermissionError": ".errors",
        "SkillPrepareError": ".errors",
        "SkillRuntimeError": ".errors",
        "SkillValidationError": ".errors",
        "StoreConflictError": ".errors",
        "WorkspaceEscapeError": ".errors",
        "file_error_code": ".errors",
        "file_error_from_os_error": ".errors",
        "SkillRuntimeFileSystem": ".filesystem",
        "BootstrapCommand": ".models",
        "FileInfo": ".models",
        "Skill": ".models",
        "SkillExecutionRequest": ".models",
        "SkillExecutionResult": ".models",
        "SkillPreparationRequest": ".models",
        "SkillRuntimeConfig": ".models",
        "BaseSkillRuntime": ".runtime",
        "SkillRuntime": ".runtime",
        "ConversationWorkspace": ".workspace",
        "ScopedFileSystem": ".workspace",
    },
)

_moved.install()

__all__ = [
    "ArtifactIntegrityError",
    "AsyncBaseSkillRuntime",
    "AsyncSkillRuntime",
    "AsyncSkillRuntimeFileSystem",
    "BaseSkillRuntime",
    "BootstrapCommand",
    "ConversationWorkspace",
    "ExecutionTransportError",
    "FileInfo",
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
    "ScopedFileSystem",
    "Skill",
    "SkillExecutionRequest",
    "SkillExecutionResult",
    "SkillPreparationRequest",
    "SkillPrepareError",
    "SkillRuntime",
    "SkillRuntimeConfig",
    "SkillRuntimeError",
    "SkillRuntimeFileSystem",
    "SkillValidationError",
    "StoreConflictError",
    "WorkspaceEscapeError",
    "__version__",
    "file_error_code",
    "file_error_from_os_error",
    "to_async",
    "to_sync",
]
