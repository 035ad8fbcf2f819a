"""Package builders and store inspection shared by the artifact tests (importable by workers)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillruntime.core.artifacts import (
    ObjectSkillArtifactStore,
    SkillArtifactStore,
    ZipSkillArtifactStore,
)


def skill_md(name: str, description: str = "A test skill.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody of {name}.\n"


def build_zip(
    members: Iterable[tuple[str, bytes | str] | zipfile.ZipInfo | tuple[zipfile.ZipInfo, bytes]],
    *,
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    """A ZIP holding ``members`` exactly as given (names are not sanitised)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for member in members:
            if isinstance(member, zipfile.ZipInfo):
                archive.writestr(member, b"")
            elif isinstance(member[0], zipfile.ZipInfo):
                archive.writestr(member[0], member[1])
            else:
                name, data = member
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = compression
                info.external_attr = 0o100644 << 16
                archive.writestr(info, data)
    return buffer.getvalue()


def good_zip(name: str = "pdf", extra: bytes = b"print('hi')\n") -> bytes:
    script = zipfile.ZipInfo("scripts/run.py", date_time=(2024, 1, 1, 0, 0, 0))
    script.external_attr = 0o100755 << 16
    script.compress_type = zipfile.ZIP_DEFLATED
    return build_zip(
        [
            ("SKILL.md", skill_md(name)),
            ("reference/notes.txt", "notes\n"),
            (script, extra),
        ]
    )


def leftovers(store: SkillArtifactStore) -> list[str]:
    """Everything a store holds besides lock files and empty internal directories."""
    found: list[str] = []
    if isinstance(store, ZipSkillArtifactStore):
        for path in sorted(store.root.rglob("*")):
            relative = path.relative_to(store.root)
            if relative.parts[0] == ".locks" or (path.is_dir() and not any(path.iterdir())):
                continue
            if path.is_dir() and relative.parts == (".staging",):
                continue
            found.append(str(relative))
        return found
    assert isinstance(store, ObjectSkillArtifactStore)
    store.filesystem.invalidate_cache()
    with contextlib.suppress(FileNotFoundError):
        found.extend(f"remote:{p}" for p in store.filesystem.find(store.base))
    for sub in ("objects", "downloads"):
        found.extend(
            f"cache:{p.relative_to(store.cache_dir)}" for p in (store.cache_dir / sub).iterdir()
        )
    return found


class CallCounter:
    """Counts calls per method name of a wrapped object; thread-safe; can log to a file."""

    def __init__(self, log: Path | None = None) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._log = log

    def record(self, name: str) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1
        if self._log is not None:
            fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, (json.dumps({"pid": os.getpid(), "call": name}) + "\n").encode())
            finally:
                os.close(fd)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())


class CountingFileSystem:
    """A proxy over an fsspec file system that counts every method call made through it."""

    def __init__(self, inner: Any, counter: CallCounter) -> None:
        self._inner = inner
        self._counter = counter
        self.protocol = inner.protocol

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute) or name == "invalidate_cache":
            return attribute
        counter = self._counter

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.record(name)
            return attribute(*args, **kwargs)

        return counted


def read_log(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]
