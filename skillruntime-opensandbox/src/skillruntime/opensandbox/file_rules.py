"""The sandbox file system's rules both faces share, free of requests to the sandbox.

:class:`~.files.OpenSandboxFileSystem` and its async twin
:class:`~.async_files.AsyncOpenSandboxFileSystem` (the source the sync one is generated from)
apply them alike: modes use the SDK's decimal-digit convention (``644``, ``755`` for
executables); a read is preceded by a ``/files/info`` check (:func:`require_readable`: no FIFO,
socket, device or directory, since execd would block opening a FIFO), and a failed download is
told apart from a directory by a stat (:func:`needs_directory_check`,
:func:`directory_read_error`); execd's entries become :class:`FileInfo` values
(:func:`entry_to_file_info`, :func:`found_info`, :func:`listed_infos`); many files go up in
batches (:func:`upload_batches`: one request per :data:`UPLOAD_BATCH_FILES` files or
:data:`UPLOAD_BATCH_BYTES` bytes, not one per file), each opened from the host with
:func:`open_local`. A streamed write reads the caller's chunks through :class:`IterableReader`
on the sync face and spools them on the async one (:data:`SPOOL_MEMORY_BYTES`), since the SDK's
multipart body reads a synchronous binary file.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from opensandbox.models.filesystem import EntryInfo
from skillruntime.core.errors import (
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    printable,
)
from skillruntime.core.models import FileInfo

from .errors import OpenSandboxFileError, OpenSandboxIsADirectoryError, is_transient

__all__ = [
    "EXECUTABLE_MODE",
    "FILE_MODE",
    "SPOOL_MEMORY_BYTES",
    "UPLOAD_BATCH_BYTES",
    "UPLOAD_BATCH_FILES",
    "IterableReader",
    "directory_read_error",
    "entry_to_file_info",
    "found_info",
    "listed_infos",
    "needs_directory_check",
    "open_local",
    "require_readable",
    "upload_batches",
]

FILE_MODE = 644
"""Mode of a plain file, in the SDK's decimal-digit convention (read as octal by execd)."""

EXECUTABLE_MODE = 755
"""Mode of an executable file or a directory (decimal digits)."""

UPLOAD_BATCH_FILES = 200
"""Files per multipart upload request."""

UPLOAD_BATCH_BYTES = 64 * 1024 * 1024
"""Bytes after which an upload batch is closed even with fewer files."""

SPOOL_MEMORY_BYTES = 4 * 1024 * 1024
"""Bytes of a streamed write the async face keeps in memory before its spool file goes to disk."""


class IterableReader(io.RawIOBase):
    """A binary, non-seekable reader over an iterable of byte chunks (counts what it handed out)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        super().__init__()
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            data = self._pending + b"".join(bytes(chunk) for chunk in self._chunks)
            self._pending = b""
            self.count += len(data)
            return data
        while not self._pending:
            try:
                self._pending = bytes(next(self._chunks))
            except StopIteration:
                return b""
        data, self._pending = self._pending[:size], self._pending[size:]
        self.count += len(data)
        return data


def _mode_is_executable(mode: int) -> bool:
    """True when the owner digit of a decimal-digit mode (``755``) has the execute bit."""
    return bool((mode // 100) % 10 & 1)


def entry_to_file_info(path: str, entry: EntryInfo) -> FileInfo:
    """A :class:`FileInfo` for the SDK entry of ``path`` (execd's ``other`` is ``is_special``)."""
    kind = (entry.entry_type or "").lower()
    is_directory = kind in {"directory", "dir"}
    modified = entry.modified_at.timestamp() if entry.modified_at is not None else None
    return FileInfo(
        path=path,
        is_directory=is_directory,
        size=0 if is_directory else max(0, int(entry.size or 0)),
        modified_time=modified,
        is_executable=not is_directory and _mode_is_executable(int(entry.mode or 0)),
        is_special=kind == "other",
    )


def require_readable(path: str, info: FileInfo | None) -> None:
    """Refuse a missing path, a directory or a FIFO, socket or device before a download.

    execd describes an entry without following a final symbolic link, so the target of a link
    is not checked here.
    """
    if info is None:
        raise RuntimeFileNotFoundError(f"File not found: {printable(path)}", path=path)
    if info.is_directory:
        raise RuntimeIsADirectoryError(
            f"Path is a directory, not a file: {printable(path)}", path=path
        )
    if info.is_special:
        raise NotRegularFileError(
            f"Cannot read {printable(path)}: not a regular file (a FIFO, socket or device)",
            path=path,
        )


def needs_directory_check(error: RuntimeFileError, exc: Exception) -> bool:
    """Whether a failed download's error should be refined by a stat: execd's answer for a
    directory is not documented, but a transient failure is returned as it is."""
    return type(error) is OpenSandboxFileError and not is_transient(exc)


def directory_read_error(path: str, error: OpenSandboxFileError) -> OpenSandboxIsADirectoryError:
    """The typed error of a download that failed because ``path`` is a directory."""
    return OpenSandboxIsADirectoryError(
        f"Path is a directory, not a file: {printable(path)}",
        path=path,
        code=error.code,
        status_code=error.status_code,
        request_id=error.request_id,
    )


def listed_infos(path: str, entries: Iterable[EntryInfo], limit: int) -> list[FileInfo]:
    """The entries execd listed below ``path`` as sorted :class:`FileInfo`, at most ``limit``."""
    prefix = path.rstrip("/") + "/"
    infos = []
    for entry in entries:
        entry_path = posixpath.normpath(entry.path)
        if entry_path.startswith(prefix):
            infos.append(entry_to_file_info(entry_path, entry))
    infos.sort(key=lambda info: info.path)
    return infos[:limit]


def found_info(path: str, found: Mapping[str, EntryInfo]) -> FileInfo | None:
    """The :class:`FileInfo` of ``path`` in an answer of ``/files/info``."""
    entry = found.get(path)
    if entry is None and len(found) == 1:
        entry = next(iter(found.values()))
    return None if entry is None else entry_to_file_info(path, entry)


def upload_batches(
    files: Iterable[tuple[Path, str, bool]],
) -> Iterator[list[tuple[Path, str, bool]]]:
    """``files`` cut into upload batches of :data:`UPLOAD_BATCH_FILES` files or
    :data:`UPLOAD_BATCH_BYTES` bytes."""
    batch: list[tuple[Path, str, bool]] = []
    batch_bytes = 0
    for item in files:
        batch.append(item)
        with contextlib.suppress(OSError):
            batch_bytes += item[0].stat().st_size
        if len(batch) >= UPLOAD_BATCH_FILES or batch_bytes >= UPLOAD_BATCH_BYTES:
            yield batch
            batch, batch_bytes = [], 0
    if batch:
        yield batch


def open_local(local_path: Path, remote_path: str) -> io.BufferedReader:
    """Open a host file to upload; a missing one is a typed error naming the remote path."""
    try:
        return local_path.open("rb")
    except FileNotFoundError as exc:
        raise RuntimeFileNotFoundError(
            f"Local file not found: {printable(str(local_path))}", path=remote_path
        ) from exc
