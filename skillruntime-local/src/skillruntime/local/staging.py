"""Copying a skill and hashing it in one pass: every byte of the source is read once.

A cold prepare needs the skill's content digest (it names the prepared copy) and a copy of its
files. :func:`copy_and_hash` opens each file once and reads it into one buffer (a file of up to
1 MiB with a single ``read``) that is both hashed and written to a new file of a staging
directory, which the runtime then renames to the digest name. The copy therefore holds exactly
the bytes that were hashed, even when a source file changes meanwhile. The digest is the one
:func:`~skillruntime.core.skills.files.skill_digest` gives: it combines per-file SHA-256
hashes in path order (:func:`~skillruntime.core.skills.files.digest_from_hashes`), so files
can be hashed in any order and on any thread.

Destination files are created relative to one descriptor of the staging directory (its path
is resolved once, not per file), with ``O_EXCL`` and ``O_NOFOLLOW``, and get exactly mode
``0o755`` or ``0o644`` (an ``fchmod`` only when the umask would clear one of those bits).
Nothing is ``fsync``-ed, like ``cp -r``. Files whose hash is already memoised are copied
kernel-side (``copy_file_range``) without being hashed again, and copied and hashed again in
one exact pass when their ``fstat`` shows a change meanwhile. Large skills are copied on a few
threads when CPUs are idle (``hashlib`` and the file calls release the GIL); the result does
not depend on the number of threads. Newly computed hashes are memoised (by the stat
fingerprint taken at the walk, and only when the descriptor's ``fstat`` still matches it), so
the next prepare of the unchanged skill reads nothing.
"""

from __future__ import annotations

import errno
import functools
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
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _fingerprint(result: os.stat_result) -> tuple[int, ...]:
    return (result.st_dev, result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


def _umask_spares_modes() -> bool:
    """True when this process's umask clears no bit of ``0o755`` (``open`` then creates the
    files with exactly their mode and no ``fchmod`` is needed). Read from ``/proc`` (setting
    and restoring the umask to learn it would race other threads); ``False`` when unknown."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8) & 0o755 == 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _hash_and_write(src: int, dst: int, size: int) -> bytes:
    """Read ``src`` once from its current offset to its end, hashing and writing every chunk to
    ``dst``; return the SHA-256 of exactly the bytes written.

    ``size`` is the size seen at the walk: a file of at most :data:`_CHUNK` bytes is read with
    one ``read`` of ``size + 1`` bytes, and a short read (the end of a regular file) ends the
    loop without the extra ``read`` that would return nothing. A file that grew meanwhile fills
    the read and is read on; whatever is read is both hashed and written, so the copy always
    holds the content its hash describes.
    """
    digest = hashlib.sha256()
    want = min(size + 1, _CHUNK)
    while data := os.read(src, want):
        digest.update(data)
        _write_all(dst, memoryview(data))
        if len(data) < want:
            break
        want = _CHUNK
    return digest.digest()


def _copy_kernel_side(src: int, dst: int) -> None:
    try:
        while os.copy_file_range(src, dst, 1 << 30):
            pass
        return
    except OSError as exc:
        if exc.errno not in _NO_COPY_RANGE:
            raise
    _restart(src, dst)
    while data := os.read(src, _CHUNK):
        _write_all(dst, memoryview(data))


def _restart(src: int, dst: int) -> None:
    os.lseek(src, 0, os.SEEK_SET)
    os.ftruncate(dst, 0)
    os.lseek(dst, 0, os.SEEK_SET)


def _copy_one(item: SkillFile, destination: str, root_fd: int, set_mode: bool) -> bytes:
    """Copy ``item`` to ``destination`` (relative to the directory ``root_fd``, created new
    with exactly its mode) and return the SHA-256 of the bytes copied; a source that became a
    symbolic link is refused (``O_NOFOLLOW``).

    A file without a memoised hash is read once: each chunk is hashed and written from the
    same buffer (on two cores measured faster than hashing and then copying kernel-side, which
    reads the file twice), so the copy holds exactly the bytes hashed. The hash is memoised
    only when the descriptor's ``fstat`` still matches the walk's fingerprint. A file whose
    hash is memoised is copied kernel-side; when its ``fstat`` no longer matches afterwards (it
    changed meanwhile), it is copied again in one exact pass and hashed.
    """
    mode = 0o755 if item.executable else 0o644
    src = os.open(item.local_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(destination, _CREATE, mode, dir_fd=root_fd)
        try:
            if set_mode:
                os.fchmod(dst, mode)
            known = known_file_hash(item)
            if known is not None:
                _copy_kernel_side(src, dst)
                if _fingerprint(os.fstat(src)) == item.fingerprint:
                    return known
                _restart(src, dst)  # changed meanwhile: one exact pass
                return _hash_and_write(src, dst, item.size)
            file_hash = _hash_and_write(src, dst, item.size)
        finally:
            os.close(dst)
        if _fingerprint(os.fstat(src)) == item.fingerprint:
            remember_file_hash(item, file_hash)
        return file_hash
    finally:
        os.close(src)


def _copy_part(files: Sequence[tuple[SkillFile, str]], root_fd: int, set_mode: bool) -> list[bytes]:
    return [_copy_one(item, destination, root_fd, set_mode) for item, destination in files]


def _make_directories(files: Sequence[SkillFile], root_fd: int) -> None:
    """Create the parent directories of ``files`` below ``root_fd``, parents first (none of
    them may exist yet)."""
    made: set[str] = {""}
    for item in files:
        parent = item.relative_path.rpartition("/")[0]
        if parent in made:
            continue
        missing: list[str] = []
        while parent not in made:
            missing.append(parent)
            parent = parent.rpartition("/")[0]
        for directory in reversed(missing):
            os.mkdir(directory, 0o755, dir_fd=root_fd)
            made.add(directory)


def _idle_cpus() -> float:
    """How many of the CPUs this process may run on were idle over the last minute (the CPU
    count less the one-minute load average; 0 when the load is unknown)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        return max(0.0, cpus - os.getloadavg()[0])
    except OSError:
        return 0.0


def _worker_count(total: int) -> int:
    """Threads for copying ``total`` bytes: one for a small skill, and otherwise one more per
    idle CPU, up to :data:`_MAX_WORKERS`. Extra threads pay only when a core is free to run
    them: on a loaded machine they measured slower than one thread (GIL hand-offs, cache
    traffic), so the copy stays on the calling thread then."""
    if total < _PARALLEL_BYTES:
        return 1
    return max(1, min(_MAX_WORKERS, 1 + int(_idle_cpus())))


def copy_and_hash(files: Sequence[SkillFile], target: Path) -> list[bytes]:
    """Copy ``files`` under the existing directory ``target`` (parents created, modes
    ``0o755``/``0o644``, nothing else copied; no file of that name may exist there yet) and
    return the SHA-256 of each file's bytes, in the order of ``files``. Raises ``OSError`` from
    the first file that fails. Nothing is flushed to stable storage (like ``cp -r``)."""
    root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _make_directories(files, root_fd)
        set_mode = not _umask_spares_modes()
        pairs = [(item, item.relative_path) for item in files]
        workers = _worker_count(sum(item.size for item in files))
        if workers == 1:
            return _copy_part(pairs, root_fd, set_mode)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(
                pool.map(
                    functools.partial(_copy_part, root_fd=root_fd, set_mode=set_mode),
                    [pairs[index::workers] for index in range(workers)],
                )
            )
        return [parts[index % workers][index // workers] for index in range(len(pairs))]
    finally:
        os.close(root_fd)
