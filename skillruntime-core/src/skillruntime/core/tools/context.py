"""What every tool shares: the runtime, its file system and runtime path resolution.

:class:`ToolContext` is the sync face, :class:`AsyncToolContext` the async one; the tools of
:mod:`~skillruntime.core.tools.async_runtime_tools` (and the sync module generated from it) see
only these methods."""

from __future__ import annotations

import posixpath
from typing import Protocol

from ..files.async_spi import AsyncSkillRuntimeFileSystem
from ..files.spi import SkillRuntimeFileSystem
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.spi import SkillRuntime

__all__ = ["AsyncToolContext", "ToolContext", "resolve_tool_path", "truncate"]


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    return f"{text[:limit]}\n... (output truncated: {dropped} more characters)"


class _NamedRuntime(Protocol):
    """What both contexts read of their runtime besides its file system."""

    @property
    def name(self) -> str: ...

    @property
    def default_working_directory(self) -> str: ...


class _Context:
    """The runtime's name and path resolution, shared by both faces."""

    runtime: _NamedRuntime

    @property
    def name(self) -> str:
        """The runtime's name, for messages."""
        return self.runtime.name

    def resolve(self, path: str | None) -> str:
        """A runtime path: absolute paths normalised, relative ones joined to the working dir."""
        return resolve_tool_path(self.runtime.default_working_directory, path)


class ToolContext(_Context):
    """The runtime the tools act on. Tools touch only its ``execute`` and file system."""

    runtime: SkillRuntime

    def __init__(self, runtime: SkillRuntime) -> None:
        self.runtime = runtime

    def file_system(self) -> SkillRuntimeFileSystem:
        """The runtime file system (fetched per call, so a closed runtime is reported)."""
        return self.runtime.get_file_system()

    @property
    def files(self) -> SkillRuntimeFileSystem:
        """:meth:`file_system` as a property."""
        return self.file_system()


class AsyncToolContext(_Context):
    """:class:`ToolContext` of an :class:`AsyncSkillRuntime`."""

    runtime: AsyncSkillRuntime

    def __init__(self, runtime: AsyncSkillRuntime) -> None:
        self.runtime = runtime

    async def file_system(self) -> AsyncSkillRuntimeFileSystem:
        """The runtime file system (fetched per call, so a closed runtime is reported)."""
        return await self.runtime.get_file_system()


def resolve_tool_path(base: str, path: str | None) -> str:
    """A tool's runtime path: absolute paths normalised, relative ones joined to ``base``."""
    if path is None or not path.strip():
        return base
    path = path.strip()
    joined = path if path.startswith("/") else posixpath.join(base, path)
    normalised = posixpath.normpath(joined)
    return "/" + normalised.lstrip("/") if normalised.startswith("//") else normalised
