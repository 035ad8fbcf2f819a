"""Which files of a skill directory leave the host (by an :class:`UploadPolicy`), their content
digest, and fast local copies.

Walking a skill never follows symbolic links (a link is skipped, never its target) and, by default,
skips ``.git/`` and the files that hold secrets (``.env``, ``.env.*``, ``credentials.json``, key
files, tool credential stores: see :class:`UploadPolicy`). Every skipped entry is logged by name.
The content digest covers each kept file's relative path, executable bit and bytes, so changed
content gets a new prepared copy and unchanged content is never sent twice.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from .policy import (
    DEFAULT_UPLOAD_POLICY,
    SECRET_FILE_NAMES,
    SECRET_FILE_PATTERNS,
    UploadPolicy,
)

__all__ = [
    "DEFAULT_UPLOAD_POLICY",
    "SECRET_FILE_NAMES",
    "SECRET_FILE_PATTERNS",
    "SkillFile",
    "SkippedFile",
    "UploadPolicy",
    "clear_hash_memo",
    "copy_skill_files",
    "digest_from_hashes",
    "iter_skill_files",
    "known_file_hash",
    "prepared_copy_digest",
    "prepared_directory_name",
    "remember_file_hash",
    "skill_digest",
    "skipped_skill_files",
]

logger = logging.getLogger(__name__)

_HASH_CHUNK = 1024 * 1024
_PARALLEL_HASH_BYTES = 8 * 1024 * 1024
_MAX_HASH_WORKERS = 4
_RACY_SECONDS = 2
_NO_COPY_RANGE = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill: its POSIX path relative to the skill root and its host path."""

    relative_path: str
    local_path: Path
    size: int
    executable: bool
    fingerprint: tuple[int, ...] = ()
    """``(device, inode, size, mtime_ns, ctime_ns)`` when known: the key of the hash memo."""


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """An entry of a skill that is not copied: its relative POSIX path (a directory's ends in
    ``/``) and why (``"symbolic link"``, ``"not a regular file"``, ``"upload policy: name
    '.env'"``, ...). It never holds file content."""

    relative_path: str
    reason: str


def iter_skill_files(
    root: Path, policy: UploadPolicy = DEFAULT_UPLOAD_POLICY
) -> Iterator[SkillFile]:
    """Yield the regular files of the skill at ``root`` that ``policy`` keeps, sorted by path.

    Symbolic links (to files or directories) are skipped, never followed. Every skipped entry is
    logged at INFO level on this module's logger with its relative path and the rule that
    skipped it (never its content); :func:`skipped_skill_files` lists them.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"Skill directory does not exist: {root}")
    for item in _walk(root, "", policy):
        if isinstance(item, SkippedFile):
            logger.info("not copying %s of skill %s: %s", item.relative_path, root, item.reason)
        else:
            yield item


def skipped_skill_files(
    root: Path, policy: UploadPolicy = DEFAULT_UPLOAD_POLICY
) -> list[SkippedFile]:
    """The entries of the skill at ``root`` that :func:`iter_skill_files` leaves out, in path
    order; an excluded directory is one entry (its content is not walked). Logs nothing."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"Skill directory does not exist: {root}")
    return [item for item in _walk(root, "", policy) if isinstance(item, SkippedFile)]


def _plain_child(directory: Path, name: str) -> Path:
    return directory / name


def _fast_child_maker() -> Callable[[Path, str], Path]:
    """``directory / name`` for a plain ``name`` (no separator), without parsing it again.

    pathlib parses every new path (several microseconds: for a skill of a thousand files a
    noticeable share of a cold prepare); ``Path.iterdir`` builds its children with the private
    ``_make_child_relpath``, which only appends. It is used when this Python has it and it
    gives the same path as ``/``; otherwise the public ``/``.
    """
    make = getattr(Path, "_make_child_relpath", None)
    if make is None:
        return _plain_child
    try:
        for base, name in ((Path("/a/b"), "c.d"), (Path("rel"), "x"), (Path("/"), "top")):
            made = make(base, name)
            if type(made) is not type(base) or made != base / name or str(made) != str(base / name):
                return _plain_child
    except Exception:  # any surprise: the public operator
        return _plain_child
    return cast("Callable[[Path, str], Path]", make)


_child = _fast_child_maker()


def _walk(directory: Path, prefix: str, policy: UploadPolicy) -> Iterator[SkillFile | SkippedFile]:
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        relative = f"{prefix}{entry.name}"
        if entry.is_symlink():
            yield SkippedFile(relative, "symbolic link (never followed)")
            continue
        if entry.is_dir(follow_symlinks=False):
            rule = policy.directory_rule(entry.name)
            if rule is None:
                yield from _walk(_child(directory, entry.name), f"{relative}/", policy)
            else:
                yield SkippedFile(f"{relative}/", f"upload policy: {rule}")
            continue
        if not entry.is_file(follow_symlinks=False):
            yield SkippedFile(relative, "not a regular file")
            continue
        rule = policy.file_rule(entry.name)
        if rule is not None:
            yield SkippedFile(relative, f"upload policy: {rule}")
            continue
        info = entry.stat(follow_symlinks=False)
        yield SkillFile(
            relative_path=relative,
            local_path=_child(directory, entry.name),
            size=info.st_size,
            executable=bool(info.st_mode & stat.S_IXUSR),
            fingerprint=(
                info.st_dev,
                info.st_ino,
                info.st_size,
                info.st_mtime_ns,
                info.st_ctime_ns,
            ),
        )


def _file_sha256(path: Path, buffer: memoryview) -> bytes:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while count := os.readv(fd, [buffer]):
            digest.update(buffer[:count])
    finally:
        os.close(fd)
    return digest.digest()


class _HashMemo:
    """Process-wide memo of file hashes keyed by stat fingerprint (bounded, thread-safe).

    A file whose modification or change time is within :data:`_RACY_SECONDS` of now is not
    memoised: a write in the same timestamp granule could otherwise go unnoticed.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, fingerprint: tuple[int, ...]) -> bytes | None:
        if not fingerprint:
            return None
        with self._lock:
            value = self._entries.get(fingerprint)
            if value is not None:
                self._entries.move_to_end(fingerprint)
            return value

    def put(self, fingerprint: tuple[int, ...], value: bytes) -> None:
        if not fingerprint:
            return
        newest_ns = max(fingerprint[3], fingerprint[4])
        if time.time_ns() - newest_ns < _RACY_SECONDS * 1_000_000_000:
            return
        with self._lock:
            self._entries[fingerprint] = value
            self._entries.move_to_end(fingerprint)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_MEMO = _HashMemo(capacity=100_000)


def clear_hash_memo() -> None:
    """Forget every memoised file hash (the next digest reads every byte again)."""
    _MEMO.clear()


def known_file_hash(item: SkillFile) -> bytes | None:
    """The memoised SHA-256 of ``item``'s bytes for its stat fingerprint, if any."""
    return _MEMO.get(item.fingerprint)


def remember_file_hash(item: SkillFile, file_hash: bytes) -> None:
    """Memoise ``file_hash`` (the SHA-256 of ``item``'s bytes) under ``item``'s fingerprint
    (ignored for a file changed in the last two seconds or without a fingerprint)."""
    _MEMO.put(item.fingerprint, file_hash)


def _hash_files(files: Sequence[SkillFile]) -> list[bytes]:
    buffer = memoryview(bytearray(_HASH_CHUNK))
    hashes: list[bytes] = []
    for item in files:
        known = _MEMO.get(item.fingerprint)
        if known is None:
            known = _file_sha256(item.local_path, buffer)
            _MEMO.put(item.fingerprint, known)
        hashes.append(known)
    return hashes


def skill_digest(files: Iterable[SkillFile]) -> str:
    """Return the hex SHA-256 content digest of a skill's files (paths, executable bits, bytes).

    Large skills are hashed on a few threads (``hashlib`` releases the GIL); the result does not
    depend on the number of threads. File hashes are memoised per process by stat fingerprint
    (device, inode, size, mtime and ctime in nanoseconds, like git's index), so preparing an
    unchanged skill again costs a directory walk, not a re-read; files changed in the last two
    seconds are always re-read.
    """
    ordered = sorted(files, key=lambda f: f.relative_path)
    total = sum(item.size for item in ordered)
    workers = 1 if total < _PARALLEL_HASH_BYTES else min(_MAX_HASH_WORKERS, os.cpu_count() or 1)
    if workers == 1:
        hashes = _hash_files(ordered)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(_hash_files, [ordered[i::workers] for i in range(workers)]))
        hashes = [parts[index % workers][index // workers] for index in range(len(ordered))]
    return digest_from_hashes(ordered, hashes)


def digest_from_hashes(files: Sequence[SkillFile], hashes: Sequence[bytes]) -> str:
    """The :func:`skill_digest` of ``files`` (sorted by relative path) whose contents have the
    SHA-256 ``hashes`` (same order): for callers that hashed the bytes themselves, e.g. while
    copying them."""
    outer = hashlib.sha256()
    for item, file_hash in zip(files, hashes, strict=True):
        outer.update(item.relative_path.encode("utf-8"))
        outer.update(b"\0x\0" if item.executable else b"\0-\0")
        outer.update(file_hash)
    return outer.hexdigest()


_UNSAFE = re.compile(r"[^a-z0-9-]+")


def prepared_copy_digest(content_digest: str, bootstrap_commands: Sequence[str]) -> str:
    """The digest that names a prepared copy: what it holds once it is bootstrapped.

    ``content_digest`` (:func:`skill_digest`) when no bootstrap command runs in the copy, else
    the hex SHA-256 over the content digest and the ``bootstrap_commands`` in order. A copy
    bootstrapped with other commands (or with none) therefore lives in another directory and is
    never reused as ready for this one. Timeouts and the environment do not count.
    """
    if not bootstrap_commands:
        return content_digest
    outer = hashlib.sha256(b"skillruntime prepared copy\0")
    outer.update(content_digest.encode("ascii"))
    for command in bootstrap_commands:
        encoded = command.encode("utf-8")
        outer.update(b"\0" + len(encoded).to_bytes(8, "big") + encoded)
    return outer.hexdigest()


def prepared_directory_name(skill_name: str, digest: str) -> str:
    """``<safe-name>-<digest12>``: the directory name of a prepared copy of a skill."""
    safe = _UNSAFE.sub("-", skill_name.lower()).strip("-")[:64] or "skill"
    return f"{safe}-{digest[:12]}"


def _copy_file(source: Path, destination: Path, mode: int) -> None:
    """Copy one regular file in the kernel where possible, creating it with exactly ``mode``."""
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        dst = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            os.fchmod(dst, mode)
            try:
                while os.copy_file_range(src, dst, 1 << 30):
                    pass
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
                os.lseek(src, 0, os.SEEK_SET)
                os.ftruncate(dst, 0)
                os.lseek(dst, 0, os.SEEK_SET)
                while chunk := os.read(src, _HASH_CHUNK):
                    os.write(dst, chunk)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def copy_skill_files(files: Sequence[SkillFile], target: Path) -> None:
    """Copy skill files under ``target`` (created), setting only the permission bits that matter.

    Files get mode ``0o755`` when executable and ``0o644`` otherwise; timestamps and other
    attributes are not copied. A source that became a symbolic link is refused, never followed.
    """
    target.mkdir(parents=True, exist_ok=True)
    made: set[Path] = {target}
    for item in files:
        destination = target.joinpath(*item.relative_path.split("/"))
        parent = destination.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        _copy_file(item.local_path, destination, 0o755 if item.executable else 0o644)
