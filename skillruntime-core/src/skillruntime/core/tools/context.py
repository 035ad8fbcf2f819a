"""What every tool shares: the runtime, its file system and runtime path resolution."""

from __future__ import annotations

import posixpath

from ..files.spi import SkillRuntimeFileSystem
from ..runtime.spi import SkillRuntime

__all__ = ["ToolContext", "resolve_tool_path", "truncate"]


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    return f"{text[:limit]}\n... (output truncated: {dropped} more characters)"


class ToolContext:
    """The runtime the tools act on. Tools touch only its ``execute`` and file system."""

    def __init__(self, runtime: SkillRuntime) -> None:
        self.runtime = runtime

    @property
    def name(self) -> str:
        """The runtime's name, for messages."""
        return self.runtime.name

    @property
    def files(self) -> SkillRuntimeFileSystem:
        """The runtime file system (fetched per call, so a closed runtime is reported)."""
        return self.runtime.get_file_system()

    def resolve(self, path: str | None) -> str:
        """A runtime path: absolute paths normalised, relative ones joined to the working dir."""
        return resolve_tool_path(self.runtime.default_working_directory, path)


def resolve_tool_path(base: str, path: str | None) -> str:
    """A tool's runtime path: absolute paths normalised, relative ones joined to ``base``."""
    if path is None or not path.strip():
        return base
    path = path.strip()
    joined = path if path.startswith("/") else posixpath.join(base, path)
    normalised = posixpath.normpath(joined)
    return "/" + normalised.lstrip("/") if normalised.startswith("//") else normalised
