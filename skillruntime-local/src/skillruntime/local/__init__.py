"""skillruntime-local: run skill commands and files on this host (not a sandbox)."""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

from ._version import __version__

if TYPE_CHECKING:
    from .async_runtime import AsyncLocalSkillRuntime
    from .filesystem import LocalFileSystem
    from .layout import LocalLayout
    from .options import LocalRuntimeOptions
    from .reaper import LocalWorkspaceReaper
    from .runtime import DEFAULT_CONVERSATIONS_ROOT, LocalSkillRuntime

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "AsyncLocalSkillRuntime": ".async_runtime",
        "LocalFileSystem": ".filesystem",
        "LocalLayout": ".layout",
        "LocalRuntimeOptions": ".options",
        "LocalWorkspaceReaper": ".reaper",
        "DEFAULT_CONVERSATIONS_ROOT": ".runtime",
        "LocalSkillRuntime": ".runtime",
    },
)

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "AsyncLocalSkillRuntime",
    "LocalFileSystem",
    "LocalLayout",
    "LocalRuntimeOptions",
    "LocalSkillRuntime",
    "LocalWorkspaceReaper",
    "__version__",
]
