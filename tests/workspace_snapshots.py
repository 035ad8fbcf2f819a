"""Shared helpers of the workspace snapshot tests: a counting proxy and host-side tree views."""

from __future__ import annotations

import os
import stat
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

from skillruntime.core.models import SkillExecutionRequest, SkillExecutionResult


class CountingFileSystem:
    """Delegates to a file system, counting the calls the snapshots make."""

    def __init__(self, inner: Any, counts: dict[str, int]) -> None:
        self._inner = inner
        self._counts = counts

    def read_stream(self, path: str, *args: Any, **kwargs: Any) -> Generator[bytes, None, None]:
        self._counts["read_stream"] += 1
        return self._inner.read_stream(path, *args, **kwargs)  # type: ignore[no-any-return]

    def upload_files(self, files: Iterable[Any]) -> int:
        self._counts["upload_files"] += 1
        return self._inner.upload_files(files)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        self._counts["other"] += 1
        return getattr(self._inner, name)


class CountingRuntime:
    """A runtime seen through its public SPI, counting every call (requests to the sandbox)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.counts = {"execute": 0, "read_stream": 0, "upload_files": 0, "other": 0}

    @property
    def name(self) -> str:
        return self.inner.name  # type: ignore[no-any-return]

    @property
    def default_working_directory(self) -> str:
        return self.inner.default_working_directory  # type: ignore[no-any-return]

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self.counts["execute"] += 1
        return self.inner.execute(request)  # type: ignore[no-any-return]

    def get_file_system(self) -> CountingFileSystem:
        return CountingFileSystem(self.inner.get_file_system(), self.counts)

    @property
    def requests(self) -> int:
        return self.counts["execute"] + self.counts["read_stream"] + self.counts["upload_files"]


def tree(root: Path, *, skip: tuple[str, ...] = ("skills",)) -> dict[bytes, tuple[str, int, Any]]:
    """``{relative path bytes: (kind, mode, content or link target)}`` of a host directory."""
    found: dict[bytes, tuple[str, int, Any]] = {}
    base = os.fsencode(root)
    for directory, dirs, files in os.walk(base):
        for name in list(dirs) + list(files):
            full = os.path.join(directory, name)
            relative = os.path.relpath(full, base)
            if relative.split(b"/")[0] in {os.fsencode(s) for s in skip}:
                continue
            info = os.lstat(full)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", 0, os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", mode, None)
            else:
                with open(full, "rb") as handle:
                    found[relative] = ("file", mode, handle.read())
    return found
