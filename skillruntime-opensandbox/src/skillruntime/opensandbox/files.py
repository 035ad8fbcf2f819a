"""The sandbox file system over the SDK's file API (execd ``/files`` and ``/directories``).

Reads stream (``read_bytes_stream``) after ``/files/info`` confirmed the entry is not a FIFO,
socket, device or directory (execd would block opening a FIFO); writes and uploads are
multipart requests whose file parts are streamed from their source, so memory stays bounded.
Many files go up in batches: one request per :data:`UPLOAD_BATCH_FILES` files (or
:data:`UPLOAD_BATCH_BYTES` bytes), not one per file.
Modes use the SDK's decimal-digit convention (``644``, ``755`` for executables). Idempotent calls
(stat, reads, listings) retry transient failures; writes and deletes are sent once.
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from opensandbox.models.filesystem import DirectoryListEntry, EntryInfo, WriteEntry
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.errors import (
    ExecutionTransportError,
    NotADirectoryFileError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
)
from skillruntime.core.files.globbing import GlobMatcher
from skillruntime.core.files.search import (
    GlobQuery,
    GrepEngine,
    GrepQuery,
    GrepResult,
    SearchResult,
)
from skillruntime.core.files.search_command import grep_from_output
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import FileInfo, SkillExecutionRequest, SkillExecutionResult

from .errors import (
    OpenSandboxFileError,
    OpenSandboxIsADirectoryError,
    file_error,
    is_not_found,
    is_transient,
)
from .retry import call_idempotent
from .search import glob_answer, glob_request, grep_found, grep_request

__all__ = [
    "EXECUTABLE_MODE",
    "FILE_MODE",
    "UPLOAD_BATCH_BYTES",
    "UPLOAD_BATCH_FILES",
    "IterableReader",
    "OpenSandboxFileSystem",
    "Recover",
    "directory_read_error",
    "entry_to_file_info",
    "found_info",
    "listed_infos",
    "needs_directory_check",
    "open_local",
    "require_readable",
    "upload_batches",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

FILE_MODE = 644
"""Mode of a plain file, in the SDK's decimal-digit convention (read as octal by execd)."""

EXECUTABLE_MODE = 755
"""Mode of an executable file or a directory (decimal digits)."""

UPLOAD_BATCH_FILES = 200
"""Files per multipart upload request."""

UPLOAD_BATCH_BYTES = 64 * 1024 * 1024
"""Bytes after which an upload batch is closed even with fewer files."""


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
        raise RuntimeFileNotFoundError(f"File not found: {path}", path=path)
    if info.is_directory:
        raise RuntimeIsADirectoryError(f"Path is a directory, not a file: {path}", path=path)
    if info.is_special:
        raise NotRegularFileError(
            f"Cannot read {path}: not a regular file (a FIFO, socket or device)", path=path
        )


def needs_directory_check(error: RuntimeFileError, exc: Exception) -> bool:
    """Whether a failed download's error should be refined by a stat: execd's answer for a
    directory is not documented, but a transient failure is returned as it is."""
    return type(error) is OpenSandboxFileError and not is_transient(exc)


def directory_read_error(path: str, error: OpenSandboxFileError) -> OpenSandboxIsADirectoryError:
    """The typed error of a download that failed because ``path`` is a directory."""
    return OpenSandboxIsADirectoryError(
        f"Path is a directory, not a file: {path}",
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
            f"Local file not found: {local_path}", path=remote_path
        ) from exc


Recover = Callable[[SandboxSync, BaseException], bool]
"""Called with the sandbox and the SDK error of a failed call; ``True`` when the sandbox had
vanished and a new handle should be used for one more attempt."""


class OpenSandboxFileSystem(SkillRuntimeFileSystem):
    """File access inside one sandbox; ``sandbox`` returns the live handle (creating it lazily).

    ``retry_seconds`` bounds the retries of idempotent calls. ``recover`` (optional) lets the
    runtime replace a sandbox that vanished; a call that failed on it is then sent once more to the
    new one (never a streaming write whose source was already partly consumed). ``owner`` and
    ``group`` (user/group names or numeric ids) own every file and directory written, so files
    belong to the user commands run as. ``run_command`` (the runtime's) runs ``glob`` and
    ``grep`` as one command in the sandbox (see :mod:`.search`); without it they walk.
    """

    def __init__(
        self,
        sandbox: Callable[[], SandboxSync],
        *,
        retry_seconds: float,
        recover: Recover | None = None,
        owner: str | None = None,
        group: str | None = None,
        run_command: Callable[[SkillExecutionRequest], SkillExecutionResult] | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._run_command = run_command
        self._owner = owner
        self._group = group
        self._retry_seconds = retry_seconds
        self._recover = recover
        self._counter_lock = threading.Lock()
        self._requests = 0

    def _entry(self, path: str, data: io.IOBase | None, mode: int) -> WriteEntry:
        return WriteEntry(path=path, data=data, mode=mode, owner=self._owner, group=self._group)

    @property
    def requests(self) -> int:
        """Requests sent so far (diagnostics and benchmarks)."""
        return self._requests

    def count_request(self) -> None:
        """Count one request sent on behalf of this file system."""
        with self._counter_lock:
            self._requests += 1

    def _call(
        self,
        operation: Callable[[SandboxSync], T],
        *,
        idempotent: bool,
        resend: Callable[[], bool] = lambda: True,
    ) -> T:
        """Run ``operation`` on the live sandbox (retried when idempotent); once more on a new
        sandbox when the first one vanished and ``resend()`` allows it.

        Retries and the vanished-sandbox check share one budget of ``retry_seconds``: after
        each transient failure the runtime is asked whether the sandbox has vanished, so a call
        on a dead sandbox moves to the replacement at once instead of retrying for the whole
        budget.
        """
        deadline = time.monotonic() + self._retry_seconds
        sandbox = self._sandbox()
        recover = self._recover
        vanished = False

        def gone(exc: BaseException) -> bool:
            nonlocal vanished
            if recover is not None and resend():
                vanished = recover(sandbox, exc)
            return vanished

        try:
            return self._call_on(
                sandbox, operation, idempotent=idempotent, deadline=deadline, abandon=gone
            )
        except Exception as exc:
            if recover is None or not resend():
                raise
            if not vanished:
                already_asked = idempotent and is_transient(exc)
                if already_asked or not recover(sandbox, exc):
                    raise
        return self._call_on(self._sandbox(), operation, idempotent=idempotent, deadline=deadline)

    def _call_on(
        self,
        sandbox: SandboxSync,
        operation: Callable[[SandboxSync], T],
        *,
        idempotent: bool,
        deadline: float | None = None,
        abandon: Callable[[BaseException], bool] | None = None,
    ) -> T:
        """Run ``operation`` on ``sandbox``, counted, and retried when idempotent (until
        ``deadline`` when given, else for ``retry_seconds``)."""

        def once() -> T:
            self.count_request()
            return operation(sandbox)

        if idempotent:
            return call_idempotent(
                once, budget_seconds=self._retry_seconds, deadline=deadline, abandon=abandon
            )
        return once()

    # ----------------------------------------------------------------- primitives

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        def generate() -> Generator[bytes, None, None]:
            self._require_readable(path)
            try:
                stream = self._call(
                    lambda sandbox: sandbox.files.read_bytes_stream(path, chunk_size=chunk_size),
                    idempotent=True,
                )
            except Exception as exc:
                raise self._read_error(path, exc) from exc
            try:
                yield from stream
            except Exception as exc:
                raise file_error("reading", path, exc) from exc
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()

        return generate()

    def _require_readable(self, path: str) -> None:
        require_readable(path, self.stat(path))

    def _read_error(self, path: str, exc: Exception) -> RuntimeFileError:
        """The typed error of a failed download; when execd's answer does not name the kind, a
        stat tells a directory apart (execd's answer for one is not documented). A transient
        failure is returned as it is: no stat against a server that is not answering."""
        error = file_error("reading", path, exc)
        if not needs_directory_check(error, exc):
            return error
        info = self._stat_quietly(path)
        if info is not None and info.is_directory:
            assert isinstance(error, OpenSandboxFileError)
            return directory_read_error(path, error)
        return error

    def _stat_quietly(self, path: str) -> FileInfo | None:
        try:
            return self.stat(path)
        except RuntimeFileError:
            return None

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        reader = IterableReader(chunks)
        mode = EXECUTABLE_MODE if executable else FILE_MODE
        try:
            self._call(
                lambda sandbox: sandbox.files.write_files([self._entry(path, reader, mode)]),
                idempotent=False,
                resend=lambda: reader.count == 0,
            )
        except Exception as exc:
            raise file_error("writing", path, exc) from exc
        return reader.count

    def stat(self, path: str) -> FileInfo | None:
        try:
            return self._info(path)
        except NotADirectoryFileError:
            return None  # a component is a file: the path does not exist

    def _info(self, path: str) -> FileInfo | None:
        """Like :meth:`stat`, but a path through a regular file raises
        :class:`NotADirectoryFileError` instead of returning ``None``."""
        try:
            found = self._call(lambda sandbox: sandbox.files.get_file_info([path]), idempotent=True)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise file_error("inspecting", path, exc) from exc
        return found_info(path, found)

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        root = self._info(path)
        if root is None:
            raise RuntimeFileNotFoundError(f"Path does not exist: {path}", path=path)
        if not root.is_directory:
            return [root]
        if limit <= 0:
            return []
        try:
            entries = self._call(
                lambda sandbox: sandbox.files.list_directory(
                    DirectoryListEntry(path=path, depth=depth)
                ),
                idempotent=True,
            )
        except Exception as exc:
            raise file_error("listing", path, exc) from exc
        return listed_infos(path, entries, limit)

    def _search(self, request: SkillExecutionRequest, path: str) -> SkillExecutionResult:
        assert self._run_command is not None
        try:
            return self._run_command(request)
        except ExecutionTransportError as exc:
            raise RuntimeFileError(str(exc), path=path) from exc

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One command for the whole walk (see :mod:`.search`); the default walk without a
        command runner or when the command failed."""
        if self._run_command is None or not root.is_directory or root.is_special:
            return super().glob(root, query)
        GlobMatcher(query.pattern)  # a bad pattern fails before any request
        found = glob_answer(self._search(glob_request(root, query), root.path), root, query)
        return super().glob(root, query) if found is None else found

    def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
    ) -> GrepResult:
        """One command for the walk and the candidate files (see :mod:`.search`); links are
        read with ``read_text``."""
        if self._run_command is None or not root.is_directory or root.is_special:
            return super().grep(root, query, read_text=read_text)
        GrepEngine(query, root.path)  # a bad pattern or glob fails before any request
        found = grep_found(self._search(grep_request(root, query), root.path))
        if found is None:
            return super().grep(root, query, read_text=read_text)
        listing, contents = found
        return grep_from_output(listing, contents, root, query, read_text or self.read_text)

    def delete(self, path: str) -> None:
        info = self.stat(path)
        if info is None:
            return
        try:
            if info.is_directory:
                self._call(
                    lambda sandbox: sandbox.files.delete_directories([path]), idempotent=False
                )
            else:
                self._call(lambda sandbox: sandbox.files.delete_files([path]), idempotent=False)
        except Exception as exc:
            if is_not_found(exc):
                return
            raise file_error("deleting", path, exc) from exc

    def make_directory(self, path: str) -> None:
        self.make_directories([path])

    # ------------------------------------------------------------------ batches

    def make_directories(self, paths: Iterable[str], *, sandbox: SandboxSync | None = None) -> None:
        """Create every directory in ``paths`` (and parents) in one request (retried: idempotent).

        With ``sandbox`` the request goes to that handle, without recovery, instead of the live
        sandbox; the runtime uses it to create the workspace while it attaches a sandbox.
        """
        entries = [self._entry(p, None, EXECUTABLE_MODE) for p in paths]
        if not entries:
            return

        def create(target: SandboxSync) -> None:
            target.files.create_directories(entries)

        try:
            if sandbox is None:
                self._call(create, idempotent=True)
            else:
                self._call_on(sandbox, create, idempotent=True)
        except Exception as exc:
            raise file_error("creating directory", entries[0].path, exc) from exc

    def upload_files(
        self, files: Iterable[tuple[Path, str, bool]], *, sandbox: SandboxSync | None = None
    ) -> int:
        """Upload host files in batched multipart requests, each file streamed from disk.

        With ``sandbox`` every batch goes to that handle and none is moved to a replacement:
        the runtime uses it to keep all files of one skill in one sandbox (it restarts the
        whole upload when that sandbox vanished).
        """
        return sum(self._upload_batch(batch, sandbox) for batch in upload_batches(files))

    def _upload_batch(self, batch: list[tuple[Path, str, bool]], target: SandboxSync | None) -> int:
        def send(sandbox: SandboxSync) -> None:
            with contextlib.ExitStack() as stack:
                entries = []
                for local_path, remote_path, executable in batch:
                    handle = stack.enter_context(open_local(local_path, remote_path))
                    mode = EXECUTABLE_MODE if executable else FILE_MODE
                    entries.append(self._entry(remote_path, handle, mode))
                sandbox.files.write_files(entries)

        try:
            if target is None:
                self._call(send, idempotent=False)
            else:
                self._call_on(target, send, idempotent=False)
        except RuntimeFileError:
            raise
        except Exception as exc:
            raise file_error("uploading", batch[0][1], exc) from exc
        return len(batch)
