"""The host file system as a :class:`SkillRuntimeFileSystem`.

Paths are host paths; a relative path is resolved against ``base_directory`` (the runtime's
default working directory). With ``root`` every path must lie below that directory and is resolved
race-free through directory descriptors (:mod:`skillruntime.local.confinement`): a symbolic link
may lead anywhere below the root but never out of it, and a directory swapped for a link while an
operation runs cannot carry it out either. Without ``root`` there is no confinement (the same
descriptor-relative resolution from ``/``); the runtime wraps this file system in a
:class:`~skillruntime.core.runtime.scoped.ScopedFileSystem` when it has a conversation workspace.

Decisions:

* **Symbolic links.** :meth:`LocalFileSystem.stat` follows links, so it describes what a read or a
  write of the path reaches; a dangling link is described as itself (a non-directory entry of the
  link's size), so it exists and can be deleted. :meth:`LocalFileSystem.list_directory` reports
  links as themselves (``lstat``) and never descends into them. :meth:`LocalFileSystem.delete`
  removes a link, never its target. Below a ``root``, a link that leads outside is refused with
  :class:`~skillruntime.core.errors.WorkspaceEscapeError` by every operation.
* **Non-regular files.** A FIFO, socket or device is never opened for reading: reads check the
  entry before opening it, open it with ``O_NONBLOCK`` and check the open descriptor again, and
  refuse anything but a regular file with :class:`~skillruntime.core.errors.NotRegularFileError`.
  ``stat`` and listings mark such entries ``is_special``.
* **Executable bit.** ``is_executable`` is the owner execute bit of a regular file (the bit skill
  digests use); it is false for directories.
* **Writes** go to a temporary file in the target's directory (created with ``O_EXCL``, opened
  through the directory's descriptor) that is renamed over the target once complete (atomic for
  readers, no ``fsync``); the mode is exactly ``0o755`` or ``0o644``. Writing through a link
  replaces the link itself with a regular file, and writing over a FIFO replaces it without
  opening it.
* **Errors** are the typed file errors of :func:`~skillruntime.core.errors.file_error_from_os_error`
  (not found, is a directory, not a directory, permission denied, invalid path).
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import posixpath
import secrets
import shutil
import stat as stat_module
from collections.abc import Callable, Generator, Iterable
from pathlib import Path

from skillruntime.core.errors import (
    InvalidPathError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    file_error_from_os_error,
    printable,
)
from skillruntime.core.files.search import GrepEngine, GrepQuery, GrepResult
from skillruntime.core.files.spi import (
    CHUNK_SIZE,
    DEFAULT_LIST_LIMIT,
    DEFAULT_READ_LIMIT,
    SkillRuntimeFileSystem,
    check_read_limit,
    read_limit_exceeded,
)
from skillruntime.core.models import FileInfo

from .confinement import (
    MAX_SYMLINK_HOPS,
    ConfinedRoot,
    Located,
    check_path_text,
    open_directory_below,
)

__all__ = ["LocalFileSystem", "write_file_atomically"]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMPORARY_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NAME_PREFIX_LIMIT = 200  # keeps ".<name>.<random>.tmp" under the usual 255-byte name limit


def _info(path: str, result: os.stat_result) -> FileInfo:
    mode = result.st_mode
    is_directory = stat_module.S_ISDIR(mode)
    return FileInfo(
        path=path,
        is_directory=is_directory,
        size=0 if is_directory else result.st_size,
        modified_time=result.st_mtime,
        is_executable=stat_module.S_ISREG(mode) and bool(mode & stat_module.S_IXUSR),
        is_special=not (is_directory or stat_module.S_ISREG(mode) or stat_module.S_ISLNK(mode)),
    )


def _lstat(located: Located) -> os.stat_result:
    return os.stat(located.name, dir_fd=located.dir_fd, follow_symlinks=False)


def _lstat_if_present(located: Located) -> os.stat_result | None:
    try:
        return _lstat(located)
    except FileNotFoundError:
        return None


def _refuse_non_regular(mode: int, path: str) -> None:
    if stat_module.S_ISDIR(mode):
        raise RuntimeIsADirectoryError(
            f"Cannot read {printable(path)}: it is a directory", path=path
        )
    if not stat_module.S_ISREG(mode):
        raise NotRegularFileError(
            f"Cannot read {printable(path)}: not a regular file (a FIFO, socket or device)",
            path=path,
        )


def _write_into(located: Located, fill: Callable[[int], int], *, executable: bool) -> int:
    """Create a temporary sibling of ``located`` through its directory descriptor, let ``fill``
    write it (returning the byte count), set the mode and rename it over the target.

    A failure (in ``fill`` or after it) leaves neither a partial target nor the temporary file.
    """
    dir_fd, name = located.dir_fd, located.name
    temporary = f".{name[:_NAME_PREFIX_LIMIT]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temporary, _TEMPORARY_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        try:
            written = fill(fd)
            os.fchmod(fd, 0o755 if executable else 0o644)
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise
    return written


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_chunks(chunks: Iterable[bytes]) -> Callable[[int], int]:
    """Write ``chunks`` in ``write`` calls of at least :data:`CHUNK_SIZE` bytes (but the last):
    small chunks are gathered first, so many tiny chunks do not cost a system call each, and a
    lone chunk is written as it is, without a copy."""

    def fill(fd: int) -> int:
        written = 0
        held: list[bytes] = []
        held_size = 0
        for chunk in chunks:
            held.append(chunk)
            held_size += len(chunk)
            if held_size >= CHUNK_SIZE:
                _write_all(fd, held[0] if len(held) == 1 else b"".join(held))
                written += held_size
                held, held_size = [], 0
        if held:
            _write_all(fd, held[0] if len(held) == 1 else b"".join(held))
            written += held_size
        return written

    return fill


def _copy_from(source_fd: int, size: int) -> Callable[[int], int]:
    """Copy ``size`` bytes kernel-side (``sendfile``), falling back to a read/write loop."""

    def fill(fd: int) -> int:
        copied = 0
        try:
            while copied < size:
                sent = os.sendfile(fd, source_fd, copied, size - copied)
                if sent == 0:
                    break
                copied += sent
            return copied
        except OSError as exc:
            if copied or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
        os.lseek(source_fd, 0, os.SEEK_SET)
        return _write_chunks(iter(lambda: os.read(source_fd, CHUNK_SIZE), b""))(fd)

    return fill


def write_file_atomically(path: str, chunks: Iterable[bytes], *, executable: bool) -> int:
    """Write ``chunks`` to a temporary sibling of the absolute host ``path``, rename it into place.

    Parent directories are created; the file mode is ``0o755`` or ``0o644``. A failure leaves
    neither a partial ``path`` nor the temporary file. Returns the bytes written.
    """
    with ConfinedRoot("/").locate(path, follow_final=False, create_parents=True) as located:
        return _write_into(located, _write_chunks(chunks), executable=executable)


class LocalFileSystem(SkillRuntimeFileSystem):
    """Host files, with relative paths resolved against ``base_directory``.

    With ``root`` (an absolute directory) every path must lie below it and is resolved race-free;
    see the module docs.
    """

    def __init__(self, base_directory: str, *, root: str | None = None) -> None:
        self._base = os.path.abspath(base_directory)
        self._root = ConfinedRoot(os.path.abspath(root) if root is not None else "/")

    def _abs(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ValueError("path must not be empty")
        normalised = posixpath.normpath(posixpath.join(self._base, check_path_text(path)))
        if normalised.startswith("//"):
            normalised = "/" + normalised.lstrip("/")
        return normalised

    def _locate(
        self, target: str, *, follow_final: bool, create_parents: bool = False
    ) -> contextlib.AbstractContextManager[Located]:
        return self._root.locate(target, follow_final=follow_final, create_parents=create_parents)

    # ----------------------------------------------------------------- primitives

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        target = self._abs(path)
        return self._read(target, chunk_size)

    def _read(self, target: str, chunk_size: int) -> Generator[bytes, None, None]:
        fd = self._open_regular(target)
        with os.fdopen(fd, "rb", buffering=0) as handle:
            while True:
                try:
                    chunk = handle.read(chunk_size)
                except OSError as exc:
                    raise file_error_from_os_error(exc, target, operation="read") from exc
                if not chunk:
                    return
                yield chunk

    def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        """One confined open and, for a file that does not change meanwhile, one ``read`` of its
        ``fstat`` size (plus one byte, which tells a file that grew since)."""
        check_read_limit(max_bytes)
        target = self._abs(path)
        fd = self._open_regular(target, blocking=False)
        try:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                raise read_limit_exceeded(path, max_bytes)
            data = os.read(fd, size + 1)
            if len(data) <= size:
                return data
            chunks = [data]
            total = len(data)
            while total <= max_bytes:  # it grew after the fstat: read on up to the limit
                chunk = os.read(fd, max(CHUNK_SIZE, max_bytes + 1 - total))
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                total += len(chunk)
            raise read_limit_exceeded(path, max_bytes)
        except OSError as exc:
            if isinstance(exc, RuntimeFileError):
                raise
            raise file_error_from_os_error(exc, target, operation="read") from exc
        finally:
            os.close(fd)

    def _open_regular(self, target: str, *, blocking: bool = True) -> int:
        """Open the regular file at the absolute ``target`` (from :meth:`_abs`) for reading and
        return its descriptor (the caller closes it); anything but a regular file is refused
        without being opened for reading. ``blocking`` clears ``O_NONBLOCK`` (which a regular
        file ignores) for callers that hand the descriptor on."""
        for _ in range(MAX_SYMLINK_HOPS):
            with self._locate(target, follow_final=True) as located:
                try:
                    mode = (located.final or _lstat(located)).st_mode
                except OSError as exc:
                    raise file_error_from_os_error(exc, target, operation="read") from exc
                if stat_module.S_ISLNK(mode):
                    continue  # became a link after the walk: resolve again
                _refuse_non_regular(mode, target)
                try:
                    fd = os.open(located.name, _READ_FLAGS, dir_fd=located.dir_fd)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        continue  # became a link after the check: resolve again
                    raise file_error_from_os_error(exc, target, operation="read") from exc
            try:
                _refuse_non_regular(os.fstat(fd).st_mode, target)
                if blocking:
                    os.set_blocking(fd, True)
            except BaseException:
                os.close(fd)
                raise
            return fd
        raise InvalidPathError(
            f"Cannot read {printable(target)}: it keeps changing into a symbolic link", path=target
        )

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        target = self._abs(path)
        try:
            with self._locate(target, follow_final=False, create_parents=True) as located:
                return _write_into(located, _write_chunks(chunks), executable=executable)
        except OSError as exc:
            if isinstance(exc, RuntimeFileError):
                raise
            raise file_error_from_os_error(exc, target, operation="write") from exc

    def overwrite_text(self, path: str, text: str, *, encoding: str = "utf-8") -> tuple[int, bool]:
        """One resolution for the check and the write; a final link (whose target decides the
        answer) takes the default's path, :meth:`stat` first."""
        target = self._abs(path)
        data = text.encode(encoding)
        try:
            with self._locate(target, follow_final=False, create_parents=True) as located:
                final = located.final
                if final is None and not self._root.confines:  # that walk takes no lstat
                    final = _lstat_if_present(located)
                if final is None or not stat_module.S_ISLNK(final.st_mode):
                    if located.name == "." or (
                        final is not None and stat_module.S_ISDIR(final.st_mode)
                    ):
                        raise RuntimeIsADirectoryError(
                            f"Cannot write {printable(target)}: it is a directory", path=target
                        )
                    written = _write_into(located, _write_chunks([data]), executable=False)
                    return written, final is not None
        except OSError as exc:
            if isinstance(exc, RuntimeFileError):
                raise
            raise file_error_from_os_error(exc, target, operation="write") from exc
        return super().overwrite_text(path, text, encoding=encoding)

    def stat(self, path: str) -> FileInfo | None:
        target = self._abs(path)
        for follow in (True, False):  # a dangling or looping link is reported as itself
            try:
                with self._locate(target, follow_final=follow) as located:
                    return _info(target, located.final or _lstat(located))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except InvalidPathError:
                if not follow:
                    raise
                continue
            except OSError as exc:
                if isinstance(exc, RuntimeFileError):
                    raise
                raise file_error_from_os_error(exc, target, operation="stat") from exc
        return None

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        root = self._abs(path)
        for _ in range(MAX_SYMLINK_HOPS):
            with self._locate(root, follow_final=True) as located:
                try:
                    result = located.final or _lstat(located)
                except OSError as exc:
                    if exc.errno == errno.ENOENT:
                        raise RuntimeFileNotFoundError(
                            f"Path does not exist: {printable(root)}", path=root
                        ) from exc
                    raise file_error_from_os_error(exc, root, operation="list") from exc
                if stat_module.S_ISLNK(result.st_mode):
                    continue  # became a link after the walk: resolve again
                if not stat_module.S_ISDIR(result.st_mode):
                    return [_info(root, result)]
                if limit <= 0 or depth < 1:
                    return []
                try:
                    fd = open_directory_below(located.dir_fd, [located.name])
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENOENT):
                        continue  # swapped meanwhile: resolve again
                    raise file_error_from_os_error(exc, root, operation="list") from exc
            try:
                return self._list_below(fd, root, depth, limit)
            finally:
                os.close(fd)
        raise InvalidPathError(
            f"Cannot list {printable(root)}: it keeps changing into a symbolic link", path=root
        )

    def _list_below(self, fd: int, root: str, depth: int, limit: int) -> list[FileInfo]:
        # A heap of (path, level, relative parts, info) yields entries in global path order
        # lazily, so only the directories whose entries are actually returned get scanned.
        found: list[FileInfo] = []
        pending: list[tuple[str, int, tuple[str, ...], FileInfo]] = []
        self._scan(fd, root, (), 1, pending)
        while pending and len(found) < limit:
            entry_path, level, parts, entry = heapq.heappop(pending)
            found.append(entry)
            if entry.is_directory and level < depth:
                self._scan(fd, entry_path, parts, level + 1, pending)
        return found

    @staticmethod
    def _scan(
        root_fd: int,
        directory: str,
        parts: tuple[str, ...],
        level: int,
        pending: list[tuple[str, int, tuple[str, ...], FileInfo]],
    ) -> None:
        try:
            fd = open_directory_below(root_fd, list(parts))
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        entry_path = posixpath.join(directory, entry.name)
                        try:
                            info = _info(entry_path, entry.stat(follow_symlinks=False))
                        except FileNotFoundError:  # removed while listing
                            continue
                        heapq.heappush(pending, (entry_path, level, (*parts, entry.name), info))
            finally:
                os.close(fd)
        except OSError as exc:
            if level == 1:
                raise file_error_from_os_error(exc, directory, operation="list") from exc
            # a subdirectory that vanished, was swapped or cannot be read is listed without
            # its children

    def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
    ) -> GrepResult:
        """The default's result, walked and read through directory descriptors
        (:mod:`skillruntime.local.search`); links met are read with ``read_text``."""
        from .search import grep_below

        if not root.is_directory or root.is_special:
            return super().grep(root, query, read_text=read_text)
        engine = GrepEngine(query, root.path)
        directory = self._abs(root.path)
        fd = self._open_directory(directory)
        if fd is None:  # no longer a directory: the default describes what it became
            return super().grep(root, query, read_text=read_text)
        try:
            truncated = grep_below(fd, directory, engine, read_text or self.read_text)
        finally:
            os.close(fd)
        return engine.result(truncated)

    def _open_directory(self, directory: str) -> int | None:
        """A descriptor of the directory ``directory`` (the caller closes it), ``None`` when it
        is not one; a final link is followed below the root."""
        for _ in range(MAX_SYMLINK_HOPS):
            with self._locate(directory, follow_final=True) as located:
                try:
                    return open_directory_below(located.dir_fd, [located.name])
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        continue  # became a link after the walk: resolve again
                    if exc.errno == errno.ENOTDIR:
                        return None
                    if exc.errno == errno.ENOENT:
                        raise RuntimeFileNotFoundError(
                            f"Path does not exist: {printable(directory)}", path=directory
                        ) from exc
                    raise file_error_from_os_error(exc, directory, operation="list") from exc
        raise InvalidPathError(
            f"Cannot list {printable(directory)}: it keeps changing into a symbolic link",
            path=directory,
        )

    def delete(self, path: str) -> None:
        target = self._abs(path)
        try:
            with self._locate(target, follow_final=False) as located:
                self._delete_entry(located)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            if isinstance(exc, RuntimeFileError):
                raise
            raise file_error_from_os_error(exc, target, operation="delete") from exc

    @staticmethod
    def _delete_entry(located: Located) -> None:
        dir_fd, name = located.dir_fd, located.name
        for _ in range(MAX_SYMLINK_HOPS):
            is_directory = stat_module.S_ISDIR(
                os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            )
            try:
                if is_directory:
                    shutil.rmtree(name, dir_fd=dir_fd)
                else:
                    os.unlink(name, dir_fd=dir_fd)
                return
            except OSError as exc:
                # The entry changed kind between the check and the removal (rmtree refuses a
                # link with an errno-less OSError): check it again.
                if exc.errno not in (errno.EISDIR, errno.ENOTDIR, errno.ELOOP, None):
                    raise
        raise InvalidPathError(
            f"Cannot delete {printable(located.path)}: it keeps changing kind", path=located.path
        )

    def make_directory(self, path: str) -> None:
        target = self._abs(path)
        try:
            with self._locate(target, follow_final=False, create_parents=True) as located:
                try:
                    os.mkdir(located.name, dir_fd=located.dir_fd)
                except FileExistsError as exc:
                    if not stat_module.S_ISDIR(
                        os.stat(located.name, dir_fd=located.dir_fd).st_mode
                    ):
                        raise RuntimeFileError(
                            f"Cannot create directory {printable(target)}: a file with that name "
                            "exists",
                            path=target,
                        ) from exc
        except OSError as exc:
            if isinstance(exc, RuntimeFileError):
                raise
            raise file_error_from_os_error(exc, target, operation="create directory") from exc

    # ------------------------------------------------------------------- derived

    def upload(
        self,
        local_path: str | os.PathLike[str],
        path: str,
        *,
        executable: bool | None = None,
    ) -> int:
        """Copy a host file atomically, kernel-side where the platform allows (``sendfile``)."""
        source = Path(local_path)
        target = self._abs(path)
        try:
            source_fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            raise RuntimeFileNotFoundError(
                f"Local file not found: {printable(str(source))}", path=target
            ) from exc
        except OSError as exc:
            raise file_error_from_os_error(exc, target, operation="upload to") from exc
        try:
            source_stat = os.fstat(source_fd)
            if not stat_module.S_ISREG(source_stat.st_mode):
                raise RuntimeFileError(
                    f"Local path is not a regular file: {printable(str(source))}", path=target
                )
            os.set_blocking(source_fd, True)
            if executable is None:
                executable = bool(source_stat.st_mode & 0o111)
            try:
                with self._locate(target, follow_final=False, create_parents=True) as located:
                    _write_into(
                        located, _copy_from(source_fd, source_stat.st_size), executable=executable
                    )
            except OSError as exc:
                if isinstance(exc, RuntimeFileError):
                    raise
                raise file_error_from_os_error(exc, target, operation="write") from exc
        finally:
            os.close(source_fd)
        return source_stat.st_size
