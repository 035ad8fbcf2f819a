"""Copying a skill and hashing it in one pass: every byte of the source is read once.

A cold prepare needs the skill's content digest (it names the prepared copy) and a copy of its
files. Hashing the whole tree and then copying it walks and opens every file twice, the second
time after the first pass has pushed its pages out of the CPU caches; :func:`copy_and_hash`
opens each file once, hashes it and copies it while it is hot, into a staging directory that
the runtime renames to the digest name. The digest is the one
:func:`~skillruntime.core.skills.files.skill_digest` gives (same definition, computed by
:func:`~skillruntime.core.skills.files.digest_from_hashes`), and the copy holds exactly the bytes
that were hashed, even when a source file changes meanwhile.

Files whose hash is already memoised are copied kernel-side (``copy_file_range``) without being
hashed again. Large skills are copied on a few threads (``hashlib`` and the file calls release
the GIL); the result does not depend on the number of threads. Newly computed hashes are
memoised (by the stat fingerprint taken at the walk, and only when the descriptor's ``fstat``
still matches it), so the next prepare of the unchanged skill reads nothing.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from skillruntime.core.skills.files import (
    SkillFile,
    known_file_hash,
    remember_file_hash,
)

__all__ = ["copy_and_hash"]

_CHUNK = 1024 * 1024
_PARALLEL_BYTES = 8 * 1024 * 1024
_MAX_WORKERS = 4
_NO_COPY_RANGE = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})


def _fingerprint(result: os.stat_result) -> tuple[int, ...]:
    return (result.st_dev, result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _copy_kernel_side(src: int, dst: int, buffer: memoryview) -> None:
    try:
        while os.copy_file_range(src, dst, 1 << 30):
            pass
        return
    except OSError as exc:
        if exc.errno not in _NO_COPY_RANGE:
            raise
    os.lseek(src, 0, os.SEEK_SET)
    os.ftruncate(dst, 0)
    os.lseek(dst, 0, os.SEEK_SET)
    while count := os.readv(src, [buffer]):
        _write_all(dst, buffer[:count])


def _hash_and_write(src: int, dst: int, buffer: memoryview) -> bytes:
    """Read ``src`` once from its start, hashing and writing every chunk to ``dst``."""
    os.lseek(src, 0, os.SEEK_SET)
    os.ftruncate(dst, 0)
    os.lseek(dst, 0, os.SEEK_SET)
    digest = hashlib.sha256()
    while count := os.readv(src, [buffer]):
        chunk = buffer[:count]
        digest.update(chunk)
        _write_all(dst, chunk)
    return digest.digest()


def _copy_one(item: SkillFile, destination: str, buffer: memoryview) -> bytes:
    """Copy ``item`` to ``destination`` (created with exactly its mode) and return the SHA-256
    of the bytes copied; a source that became a symbolic link is refused (``O_NOFOLLOW``).

    The file is opened once: hashed through ``buffer`` (its pages are then in the page cache)
    and copied kernel-side, which measured faster than writing the buffer out, on ext4 most of
    all. When the source's ``fstat`` no longer matches the walk's fingerprint afterwards (it
    changed meanwhile), it is copied again by writing exactly the bytes hashed, so the copy
    always holds the content its hash describes.
    """
    mode = 0o755 if item.executable else 0o644
    known = known_file_hash(item)
    src = os.open(item.local_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            os.fchmod(dst, mode)
            if known is not None:
                _copy_kernel_side(src, dst, buffer)
                return known
            digest = hashlib.sha256()
            while count := os.readv(src, [buffer]):
                digest.update(buffer[:count])
            os.lseek(src, 0, os.SEEK_SET)
            _copy_kernel_side(src, dst, buffer)
            file_hash = digest.digest()
            if _fingerprint(os.fstat(src)) != item.fingerprint:
                return _hash_and_write(src, dst, buffer)  # changed meanwhile: one exact pass
            remember_file_hash(item, file_hash)
            return file_hash
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_part(files: Sequence[tuple[SkillFile, str]]) -> list[bytes]:
    buffer = memoryview(bytearray(_CHUNK))
    return [_copy_one(item, destination, buffer) for item, destination in files]


def copy_and_hash(files: Sequence[SkillFile], target: Path) -> list[bytes]:
    """Copy ``files`` under the existing directory ``target`` (parents created, modes
    ``0o755``/``0o644``, nothing else copied) and return the SHA-256 of each file's bytes, in
    the order of ``files``. Raises ``OSError`` from the first file that fails."""
    root = os.fspath(target)
    made: set[str] = {root}
    pairs: list[tuple[SkillFile, str]] = []
    for item in files:  # plain strings: pathlib costs more than the copy of a small file
        destination = f"{root}/{item.relative_path}"
        parent = os.path.dirname(destination)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        pairs.append((item, destination))
    total = sum(item.size for item in files)
    workers = 1 if total < _PARALLEL_BYTES else min(_MAX_WORKERS, os.cpu_count() or 1)
    if workers == 1:
        return _copy_part(pairs)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(_copy_part, [pairs[index::workers] for index in range(workers)]))
    return [parts[index % workers][index // workers] for index in range(len(pairs))]
