"""skillruntime core: the SkillRuntime SPI, its models, skill files and conversation workspaces."""

from .errors import (
    ArtifactIntegrityError,
    ExecutionTransportError,
    FileTooLargeError,
    PluginNotFoundError,
    RuntimeClosedError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    SkillPrepareError,
    SkillRuntimeError,
    SkillValidationError,
    StoreConflictError,
    WorkspaceEscapeError,
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

__all__ = [
    "ArtifactIntegrityError",
    "BaseSkillRuntime",
    "BootstrapCommand",
    "ConversationWorkspace",
    "ExecutionTransportError",
    "FileInfo",
    "FileTooLargeError",
    "PluginNotFoundError",
    "RuntimeClosedError",
    "RuntimeFileError",
    "RuntimeFileNotFoundError",
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
]
