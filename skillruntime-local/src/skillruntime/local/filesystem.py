"""The host file system as a :class:`SkillRuntimeFileSystem`.

Paths are host paths; a relative path is resolved against ``base_directory`` (the runtime's
default working directory). There is no confinement here: the runtime wraps this file system in a
:class:`~skillruntime.core.workspace.ScopedFileSystem` when it has a conversation workspace.

Decisions:

* **Symbolic links.** :meth:`LocalFileSystem.stat` follows links, so it describes what a read or a
  write of the path reaches; a dangling link is described as itself (a non-directory entry of the
  link's size), so it exists and can be deleted. :meth:`LocalFileSystem.list_directory` reports
  links as themselves (``lstat``) and never descends into them. :meth:`LocalFileSystem.delete`
  removes a link, never its target.
* **Executable bit.** ``is_executable`` is the owner execute bit of a regular file (the bit skill
  digests use); it is false for directories.
* **Writes** go to a temporary file in the target's directory that is renamed over the target once
  complete (atomic for readers, no ``fsync``); the mode is exactly ``0o755`` or ``0o644``. Writing
  through a link replaces the link itself with a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import posixpath
import shutil
import stat as stat_module
import tempfile
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path

from skillruntime.core.errors import RuntimeFileError, RuntimeFileNotFoundError
from skillruntime.core.filesystem import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import FileInfo

__all__ = ["LocalFileSystem", "write_file_atomically"]

_MISSING_ERRNOS = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR}


def _error(exc: OSError, what: str, path: str) -> RuntimeFileError:
    reason = exc.strerror or str(exc)
    if exc.errno in _MISSING_ERRNOS:
        return RuntimeFileNotFoundError(f"Cannot {what} {path}: {reason}", path=path)
    return RuntimeFileError(f"Cannot {what} {path}: {reason}", path=path)


def _info(path: str, result: os.stat_result) -> FileInfo:
    is_directory = stat_module.S_ISDIR(result.st_mode)
    return FileInfo(
        path=path,
        is_directory=is_directory,
        size=0 if is_directory else result.st_size,
        modified_time=result.st_mtime,
        is_executable=stat_module.S_ISREG(result.st_mode)
        and bool(result.st_mode & stat_module.S_IXUSR),
    )


@contextlib.contextmanager
def _replaced_atomically(path: str, *, executable: bool) -> Iterator[str]:
    """Yield a new temporary sibling of ``path``; once the block filled it, rename it over ``path``.

    Parent directories are created and the mode is set to ``0o755`` or ``0o644`` before the
    rename. A failure (in the block or after it) leaves neither a partial ``path`` nor the
    temporary file.
    """
    parent, name = posixpath.split(path)
    parent = parent or "."
    os.makedirs(parent, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        yield temporary
        os.chmod(temporary, 0o755 if executable else 0o644)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_file_atomically(path: str, chunks: Iterable[bytes], *, executable: bool) -> int:
    """Write ``chunks`` to a temporary sibling of ``path`` and rename it into place.

    Parent directories are created; the file mode is ``0o755`` or ``0o644``. A failure leaves
    neither a partial ``path`` nor the temporary file. Returns the bytes written.
    """
    written = 0
    with (
        _replaced_atomically(path, executable=executable) as temporary,
        open(temporary, "wb") as handle,
    ):
        for chunk in chunks:
            handle.write(chunk)
            written += len(chunk)
    return written


class LocalFileSystem(SkillRuntimeFileSystem):
    """Host files, with relative paths resolved against ``base_directory``."""

    def __init__(self, base_directory: str) -> None:
        self._base = os.path.abspath(base_directory)

    def _abs(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ValueError("path must not be empty")
        if "\x00" in path:
            raise ValueError("path must not contain a NUL character")
        return posixpath.normpath(posixpath.join(self._base, path))

    # ----------------------------------------------------------------- primitives

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        target = self._abs(path)
        return self._read(target, chunk_size)

    @staticmethod
    def _read(target: str, chunk_size: int) -> Generator[bytes, None, None]:
        try:
            handle = open(target, "rb")  # noqa: SIM115 - closed in the finally below
        except OSError as exc:
            raise _error(exc, "read", target) from exc
        try:
            if not stat_module.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise RuntimeFileNotFoundError(f"Not a regular file: {target}", path=target)
            while True:
                try:
                    chunk = handle.read(chunk_size)
                except OSError as exc:
                    raise _error(exc, "read", target) from exc
                if not chunk:
                    return
                yield chunk
        finally:
            handle.close()

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        target = self._abs(path)
        try:
            return write_file_atomically(target, chunks, executable=executable)
        except OSError as exc:
            raise _error(exc, "write", target) from exc

    def stat(self, path: str) -> FileInfo | None:
        target = self._abs(path)
        try:
            return _info(target, os.stat(target))
        except FileNotFoundError:
            pass
        except NotADirectoryError:
            return None
        except OSError as exc:
            raise _error(exc, "stat", target) from exc
        try:  # a dangling symbolic link is reported as itself
            return _info(target, os.lstat(target))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise _error(exc, "stat", target) from exc

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        root = self._abs(path)
        info = self.stat(root)
        if info is None:
            raise RuntimeFileNotFoundError(f"Path does not exist: {root}", path=root)
        if not info.is_directory:
            return [info]
        if limit <= 0 or depth < 1:
            return []
        # A heap of (path, level, is_directory) yields entries in global path order lazily, so
        # only the directories whose entries are actually returned get scanned.
        found: list[FileInfo] = []
        pending: list[tuple[str, int, FileInfo]] = []
        self._scan(root, 1, pending)
        while pending and len(found) < limit:
            entry_path, level, entry = heapq.heappop(pending)
            found.append(entry)
            if entry.is_directory and level < depth:
                self._scan(entry_path, level + 1, pending)
        return found

    def _scan(self, directory: str, level: int, pending: list[tuple[str, int, FileInfo]]) -> None:
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    entry_path = posixpath.join(directory, entry.name)
                    try:
                        info = _info(entry_path, entry.stat(follow_symlinks=False))
                    except FileNotFoundError:  # removed while listing
                        continue
                    heapq.heappush(pending, (entry_path, level, info))
        except OSError as exc:
            if level == 1:
                raise _error(exc, "list", directory) from exc
            # a subdirectory that vanished or cannot be read is listed without its children

    def delete(self, path: str) -> None:
        target = self._abs(path)
        try:
            mode = os.lstat(target).st_mode
            if stat_module.S_ISDIR(mode):
                shutil.rmtree(target)
            else:
                os.unlink(target)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise _error(exc, "delete", target) from exc

    def make_directory(self, path: str) -> None:
        target = self._abs(path)
        try:
            os.makedirs(target, exist_ok=True)
        except FileExistsError as exc:
            raise RuntimeFileError(
                f"Cannot create directory {target}: a file with that name exists", path=target
            ) from exc
        except OSError as exc:
            raise _error(exc, "create directory", target) from exc

    # ------------------------------------------------------------------- derived

    def upload(
        self,
        local_path: str | os.PathLike[str],
        path: str,
        *,
        executable: bool | None = None,
    ) -> int:
        """Copy a host file atomically with :func:`shutil.copyfile` (kernel-side on Linux)."""
        source = Path(local_path)
        target = self._abs(path)
        try:
            source_stat = source.stat()
        except FileNotFoundError as exc:
            raise RuntimeFileNotFoundError(f"Local file not found: {source}", path=target) from exc
        if not stat_module.S_ISREG(source_stat.st_mode):
            raise RuntimeFileError(f"Local path is not a regular file: {source}", path=target)
        if executable is None:
            executable = bool(source_stat.st_mode & 0o111)
        try:
            with _replaced_atomically(target, executable=executable) as temporary:
                shutil.copyfile(source, temporary)
        except OSError as exc:
            raise _error(exc, "write", target) from exc
        return source_stat.st_size
