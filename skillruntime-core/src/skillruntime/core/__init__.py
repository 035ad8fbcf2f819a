"""skillruntime core: the SkillRuntime SPI, its models, skill files and conversation workspaces.

Runtimes are built by name from the installed plugins with :func:`create_runtime` (and
:func:`create_async_runtime`), both from :mod:`skillruntime.core.plugins.registry`.
"""

from typing import TYPE_CHECKING, Any

from . import _moved
from ._lazy import lazy_attributes
from ._version import __version__
from .observability import hooks as _audit_hooks

if TYPE_CHECKING:
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
    from .files.async_spi import AsyncSkillRuntimeFileSystem
    from .files.spi import SkillRuntimeFileSystem
    from .models import (
        BootstrapCommand,
        FileInfo,
        Skill,
        SkillExecutionRequest,
        SkillExecutionResult,
        SkillPreparationRequest,
        SkillRuntimeConfig,
    )
    from .plugins.registry import create_async_runtime, create_runtime
    from .runtime.async_spi import AsyncBaseSkillRuntime, AsyncSkillRuntime
    from .runtime.bridge import to_async, to_sync
    from .runtime.scoped import ScopedFileSystem
    from .runtime.spi import BaseSkillRuntime, SkillRuntime
    from .runtime.workspace import ConversationWorkspace

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "AsyncSkillRuntimeFileSystem": ".files.async_spi",
        "AsyncBaseSkillRuntime": ".runtime.async_spi",
        "AsyncSkillRuntime": ".runtime.async_spi",
        "to_async": ".runtime.bridge",
        "to_sync": ".runtime.bridge",
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
        "SkillRuntimeFileSystem": ".files.spi",
        "BootstrapCommand": ".models",
        "FileInfo": ".models",
        "Skill": ".models",
        "SkillExecutionRequest": ".models",
        "SkillExecutionResult": ".models",
        "SkillPreparationRequest": ".models",
        "SkillRuntimeConfig": ".models",
        "create_async_runtime": ".plugins.registry",
        "create_runtime": ".plugins.registry",
        "BaseSkillRuntime": ".runtime.spi",
        "SkillRuntime": ".runtime.spi",
        "ConversationWorkspace": ".runtime.workspace",
        "ScopedFileSystem": ".runtime.scoped",
    },
)

_moved.install()


def _audit_hook_implementations() -> list[Any]:
    """The audit hook's implementations from the plugin registry, loaded on the first event."""
    from .plugins.registry import audit_hook_implementations

    return audit_hook_implementations()


_audit_hooks.set_hook_source(_audit_hook_implementations)

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
    "create_async_runtime",
    "create_runtime",
    "file_error_code",
    "file_error_from_os_error",
    "to_async",
    "to_sync",
]
