"""skillruntime core: the SkillRuntime SPI, its models, skill files and conversation workspaces."""

from . import _moved
from ._version import __version__
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
