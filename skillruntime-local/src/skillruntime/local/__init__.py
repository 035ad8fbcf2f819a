"""skillruntime-local: run skill commands and files on this host (not a sandbox)."""

from ._version import __version__
from .async_runtime import AsyncLocalSkillRuntime
from .filesystem import LocalFileSystem
from .options import LocalRuntimeOptions
from .runtime import DEFAULT_CONVERSATIONS_ROOT, LocalSkillRuntime

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "AsyncLocalSkillRuntime",
    "LocalFileSystem",
    "LocalRuntimeOptions",
    "LocalSkillRuntime",
    "__version__",
]
