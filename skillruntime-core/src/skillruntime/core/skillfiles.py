"""Which files of a skill directory leave the host, their content digest, and fast local copies.

Walking a skill never follows symbolic links (a link is skipped, never its target) and, by default,
skips ``.git/``, ``.env``, ``.env.*`` and ``credentials*``. The content digest covers each kept
file's relative path, executable bit and bytes, so changed content gets a new prepared copy and
unchanged content is never sent twice.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFAULT_UPLOAD_POLICY",
    "SkillFile",
    "UploadPolicy",
    "copy_skill_files",
    "iter_skill_files",
    "prepared_directory_name",
    "skill_digest",
]

logger = logging.getLogger(__name__)

_HASH_CHUNK = 1024 * 1024


class UploadPolicy(BaseModel):
    """Names excluded when a skill is copied or uploaded (compared case-insensitively)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    excluded_directories: tuple[str, ...] = (".git",)
    excluded_file_names: tuple[str, ...] = (".env",)
    excluded_file_prefixes: tuple[str, ...] = (".env.", "credentials")

    def allows_directory(self, name: str) -> bool:
        """True when a directory with this name is walked into."""
        return name.lower() not in {d.lower() for d in self.excluded_directories}

    def allows_file(self, name: str) -> bool:
        """True when a regular file with this name is kept."""
        lowered = name.lower()
        if lowered in {n.lower() for n in self.excluded_file_names}:
            return False
        return not any(lowered.startswith(p.lower()) for p in self.excluded_file_prefixes)


DEFAULT_UPLOAD_POLICY = UploadPolicy()
"""The default policy: skip ``.git/``, ``.env``, ``.env.*`` and ``credentials*``."""


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill: its POSIX path relative to the skill root and its host path."""

    relative_path: str
    local_path: Path
    size: int
    executable: bool


def iter_skill_files(
    root: Path, policy: UploadPolicy = DEFAULT_UPLOAD_POLICY
) -> Iterator[SkillFile]:
    """Yield the regular files of the skill at ``root`` that ``policy`` keeps, sorted by path.

    Symbolic links (to files or directories) are skipped and logged at debug level, never followed.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"Skill directory does not exist: {root}")
    yield from _walk(root, "", policy)


def _walk(directory: Path, prefix: str, policy: UploadPolicy) -> Iterator[SkillFile]:
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        relative = f"{prefix}{entry.name}"
        if entry.is_symlink():
            logger.debug("skipping symbolic link in skill: %s", relative)
            continue
        if entry.is_dir(follow_symlinks=False):
            if policy.allows_directory(entry.name):
                yield from _walk(Path(entry.path), f"{relative}/", policy)
            continue
        if not entry.is_file(follow_symlinks=False) or not policy.allows_file(entry.name):
            continue
        info = entry.stat(follow_symlinks=False)
        yield SkillFile(
            relative_path=relative,
            local_path=Path(entry.path),
            size=info.st_size,
            executable=bool(info.st_mode & stat.S_IXUSR),
        )


def skill_digest(files: Iterable[SkillFile]) -> str:
    """Return the hex SHA-256 content digest of a skill's files (paths, executable bits, bytes)."""
    outer = hashlib.sha256()
    for item in sorted(files, key=lambda f: f.relative_path):
        inner = hashlib.sha256()
        with item.local_path.open("rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                inner.update(chunk)
        outer.update(item.relative_path.encode("utf-8"))
        outer.update(b"\0x\0" if item.executable else b"\0-\0")
        outer.update(inner.digest())
    return outer.hexdigest()


_UNSAFE = re.compile(r"[^a-z0-9-]+")


def prepared_directory_name(skill_name: str, digest: str) -> str:
    """``<safe-name>-<digest12>``: the directory name of a prepared copy of a skill."""
    safe = _UNSAFE.sub("-", skill_name.lower()).strip("-")[:64] or "skill"
    return f"{safe}-{digest[:12]}"


def copy_skill_files(files: Sequence[SkillFile], target: Path) -> None:
    """Copy skill files under ``target`` (created), setting only the permission bits that matter.

    Files get mode ``0o755`` when executable and ``0o644`` otherwise; timestamps and other
    attributes are not copied.
    """
    target.mkdir(parents=True, exist_ok=True)
    made: set[Path] = {target}
    for item in files:
        destination = target.joinpath(*item.relative_path.split("/"))
        parent = destination.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        shutil.copyfile(item.local_path, destination, follow_symlinks=False)
        os.chmod(destination, 0o755 if item.executable else 0o644)
