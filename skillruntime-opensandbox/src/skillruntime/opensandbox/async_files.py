"""``AsyncOpenSandboxFileSystem``: the sandbox file system over the SDK's file API (execd
``/files`` and ``/directories``), with ``Sandbox``.

``skillruntime.opensandbox.async_files`` is the source of both file systems:
``skillruntime.opensandbox.files`` (``OpenSandboxFileSystem``, on the SDK's sync API) is
generated from it by ``scripts/generate_sync.py``. Their rules live once, free of requests, in
:mod:`.file_rules`, whose names are also importable from here: reads stream
(``read_bytes_stream``) after ``/files/info`` confirmed the entry is not a FIFO, socket, device or
directory; modes use the SDK's decimal-digit convention; many files go up in batches, one
multipart request per :data:`~.file_rules.UPLOAD_BATCH_FILES` files (or
:data:`~.file_rules.UPLOAD_BATCH_BYTES` bytes), each file part streamed from disk. Idempotent
calls (stat, reads, listings) retry transient failures (:mod:`.retry`); writes and deletes are
sent once. A call that failed on a sandbox that has vanished is sent once more to the
replacement (never a streaming write whose source was already partly consumed).

``write_stream`` is where the faces differ: the sync face streams the caller's chunks into the
multipart body as they come (:class:`~.file_rules.IterableReader`); the async face spools its
chunks (async or not) into a temporary file that stays in memory up to
:data:`~.file_rules.SPOOL_MEMORY_BYTES` and goes to disk beyond, since the SDK's multipart body
reads a synchronous binary file. Memory stays bounded whatever the size on both.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeAlias, TypeVar

from opensandbox.models.filesystem import DirectoryListEntry, WriteEntry
from opensandbox.sandbox import Sandbox
from skillruntime.core.errors import (
    ExecutionTransportError,
    NotADirectoryFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    printable,
)
from skillruntime.core.files.async_spi import (
    AsyncChunks,
    AsyncSkillRuntimeFileSystem,
    aiter_chunks,
)
from skillruntime.core.files.globbing import GlobMatcher
from skillruntime.core.files.search import (
    GlobQuery,
    GrepEngine,
    GrepQuery,
    GrepResult,
    SearchResult,
)
from skillruntime.core.files.search_command import async_grep_from_output
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT
from skillruntime.core.models import FileInfo, SkillExecutionRequest, SkillExecutionResult

from .errors import OpenSandboxFileError, file_error, is_not_found, is_transient
from .file_rules import (
    EXECUTABLE_MODE,
    FILE_MODE,
    SPOOL_MEMORY_BYTES,
    UPLOAD_BATCH_BYTES,
    UPLOAD_BATCH_FILES,
    IterableReader,
    directory_read_error,
    entry_to_file_info,
    found_info,
    listed_infos,
    needs_directory_check,
    open_local,
    require_readable,
    upload_batches,
)
from .retry import acall_idempotent
from .search import glob_answer, glob_request, grep_found, grep_request

__all__ = [
    "EXECUTABLE_MODE",
    "FILE_MODE",
    "SPOOL_MEMORY_BYTES",
    "UPLOAD_BATCH_BYTES",
    "UPLOAD_BATCH_FILES",
    "AsyncOpenSandboxFileSystem",
    "AsyncRecover",
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

logger = logging.getLogger(__name__)

T = TypeVar("T")

if True:  # unasync: async
    _Live: TypeAlias = Callable[[], Awaitable[Sandbox]]
    _Operation: TypeAlias = Callable[[Sandbox], Awaitable[T]]
    _Abandon: TypeAlias = Callable[[BaseException], Awaitable[bool]]
    _RunCommand: TypeAlias = Callable[[SkillExecutionRequest], Awaitable[SkillExecutionResult]]
    _ReadText: TypeAlias = Callable[[str, int], Awaitable[str]]
    _Chunks: TypeAlias = AsyncChunks
    AsyncRecover: TypeAlias = Callable[[Sandbox, BaseException], Awaitable[bool]]
else:  # unasync: sync
    _Live: TypeAlias = Callable[[], Sandbox]
    _Operation: TypeAlias = Callable[[Sandbox], T]
    _Abandon: TypeAlias = Callable[[BaseException], bool]
    _RunCommand: TypeAlias = Callable[[SkillExecutionRequest], SkillExecutionResult]
    _ReadText: TypeAlias = Callable[[str, int], str]
    _Chunks: TypeAlias = Iterable[bytes]
    Recover: TypeAlias = Callable[[Sandbox, BaseException], bool]
"""Called with the sandbox and the SDK error of a failed call; ``True`` when the sandbox had
vanished and a new handle should be used for one more attempt."""


class AsyncOpenSandboxFileSystem(AsyncSkillRuntimeFileSystem):
    """File access inside one sandbox; ``sandbox`` returns the live handle (creating it lazily).

    ``retry_seconds`` bounds the retries of idempotent calls. ``recover`` (optional) lets the
    runtime replace a sandbox that vanished; a call that failed on it is then sent once more to the
    new one (never a streaming write whose source was already partly consumed). ``owner`` and
    ``group`` (user/group names or numeric ids) own every file and directory written, so files
    belong to the user commands run as. ``run_command`` (the runtime's) runs ``glob`` and
    ``grep`` as one command in the sandbox (see :mod:`.search`); without it they walk. On the
    async face ``sandbox``, ``recover`` and ``run_command`` are coroutine functions.
    """

    def __init__(
        self,
        sandbox: _Live,
        *,
        retry_seconds: float,
        recover: AsyncRecover | None = None,
        owner: str | None = None,
        group: str | None = None,
        run_command: _RunCommand | None = None,
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

    async def _call(
        self,
        operation: _Operation[T],
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
        sandbox = await self._sandbox()
        recover = self._recover
        vanished = False

        async def gone(exc: BaseException) -> bool:
            nonlocal vanished
            if recover is not None and resend():
                vanished = await recover(sandbox, exc)
            return vanished

        try:
            return await self._call_on(
                sandbox, operation, idempotent=idempotent, deadline=deadline, abandon=gone
            )
        except Exception as exc:
            if recover is None or not resend():
                raise
            if not vanished:
                already_asked = idempotent and is_transient(exc)
                if already_asked or not await recover(sandbox, exc):
                    raise
        return await self._call_on(
            await self._sandbox(), operation, idempotent=idempotent, deadline=deadline
        )

    async def _call_on(
        self,
        sandbox: Sandbox,
        operation: _Operation[T],
        *,
        idempotent: bool,
        deadline: float | None = None,
        abandon: _Abandon | None = None,
    ) -> T:
        """Run ``operation`` on ``sandbox``, counted, and retried when idempotent (until
        ``deadline`` when given, else for ``retry_seconds``)."""

        async def once() -> T:
            self.count_request()
            return await operation(sandbox)

        if idempotent:
            return await acall_idempotent(
                once, budget_seconds=self._retry_seconds, deadline=deadline, abandon=abandon
            )
        return await once()

    # ----------------------------------------------------------------- primitives

    async def read_stream(
        self, path: str, chunk_size: int = CHUNK_SIZE
    ) -> AsyncGenerator[bytes, None]:
        require_readable(path, await self.stat(path))
        try:
            stream = await self._call(
                lambda sandbox: sandbox.files.read_bytes_stream(path, chunk_size=chunk_size),
                idempotent=True,
            )
        except Exception as exc:
            raise await self._read_error(path, exc) from exc
        try:
            if True:  # unasync: async
                async for chunk in stream:
                    yield chunk
            else:  # unasync: sync
                # 'yield from' is not valid in the async source's coroutine function
                for chunk in stream:  # noqa: UP028, RUF100 (UP028 in the generated module only)
                    yield chunk
        except Exception as exc:
            raise file_error("reading", path, exc) from exc
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    async def _read_error(self, path: str, exc: Exception) -> RuntimeFileError:
        """The typed error of a failed download; when execd's answer does not name the kind, a
        stat tells a directory apart (execd's answer for one is not documented). A transient
        failure is returned as it is: no stat against a server that is not answering."""
        error = file_error("reading", path, exc)
        if not needs_directory_check(error, exc):
            return error
        try:
            info = await self.stat(path)
        except RuntimeFileError:
            info = None
        if info is not None and info.is_directory:
            assert isinstance(error, OpenSandboxFileError)
            return directory_read_error(path, error)
        return error

    async def write_stream(self, path: str, chunks: _Chunks, *, executable: bool = False) -> int:
        mode = EXECUTABLE_MODE if executable else FILE_MODE
        if True:  # unasync: async
            with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
                size = 0
                async for chunk in aiter_chunks(chunks):
                    spool.write(chunk)
                    size += len(chunk)

                async def send(sandbox: Sandbox) -> None:
                    spool.seek(0)
                    await sandbox.files.write_files([self._entry(path, spool, mode)])

                try:
                    await self._call(send, idempotent=False)
                except Exception as exc:
                    raise file_error("writing", path, exc) from exc
            return size
        else:  # unasync: sync
            reader = IterableReader(chunks)
            try:
                self._call(
                    lambda sandbox: sandbox.files.write_files([self._entry(path, reader, mode)]),
                    idempotent=False,
                    resend=lambda: reader.count == 0,
                )
            except Exception as exc:
                raise file_error("writing", path, exc) from exc
            return reader.count

    async def stat(self, path: str) -> FileInfo | None:
        try:
            return await self._info(path)
        except NotADirectoryFileError:
            return None  # a component is a file: the path does not exist

    async def _info(self, path: str) -> FileInfo | None:
        """Like :meth:`stat`, but a path through a regular file raises
        :class:`NotADirectoryFileError` instead of returning ``None``."""
        try:
            found = await self._call(
                lambda sandbox: sandbox.files.get_file_info([path]), idempotent=True
            )
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise file_error("inspecting", path, exc) from exc
        return found_info(path, found)

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        root = await self._info(path)
        if root is None:
            raise RuntimeFileNotFoundError(f"Path does not exist: {printable(path)}", path=path)
        if not root.is_directory:
            return [root]
        if limit <= 0:
            return []
        try:
            entries = await self._call(
                lambda sandbox: sandbox.files.list_directory(
                    DirectoryListEntry(path=path, depth=depth)
                ),
                idempotent=True,
            )
        except Exception as exc:
            raise file_error("listing", path, exc) from exc
        return listed_infos(path, entries, limit)

    async def _search(self, request: SkillExecutionRequest, path: str) -> SkillExecutionResult:
        assert self._run_command is not None
        try:
            return await self._run_command(request)
        except ExecutionTransportError as exc:
            raise RuntimeFileError(str(exc), path=path) from exc

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One command for the whole walk (see :mod:`.search`); the default walk without a
        command runner or when the command failed."""
        if self._run_command is None or not root.is_directory or root.is_special:
            return await super().glob(root, query)
        GlobMatcher(query.pattern)  # a bad pattern fails before any request
        result = await self._search(glob_request(root, query), root.path)
        found = glob_answer(result, root, query)
        return await super().glob(root, query) if found is None else found

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: _ReadText | None = None,
    ) -> GrepResult:
        """One command for the walk and the candidate files (see :mod:`.search`); links are
        read with ``read_text``."""
        if self._run_command is None or not root.is_directory or root.is_special:
            return await super().grep(root, query, read_text=read_text)
        GrepEngine(query, root.path)  # a bad pattern or glob fails before any request
        found = grep_found(await self._search(grep_request(root, query), root.path))
        if found is None:
            return await super().grep(root, query, read_text=read_text)
        listing, contents = found
        return await async_grep_from_output(
            listing, contents, root, query, read_text or self.read_text
        )

    async def delete(self, path: str) -> None:
        info = await self.stat(path)
        if info is None:
            return
        try:
            if info.is_directory:
                await self._call(
                    lambda sandbox: sandbox.files.delete_directories([path]), idempotent=False
                )
            else:
                await self._call(
                    lambda sandbox: sandbox.files.delete_files([path]), idempotent=False
                )
        except Exception as exc:
            if is_not_found(exc):
                return
            raise file_error("deleting", path, exc) from exc

    async def make_directory(self, path: str) -> None:
        await self.make_directories([path])

    # ------------------------------------------------------------------ batches

    async def make_directories(
        self, paths: Iterable[str], *, sandbox: Sandbox | None = None
    ) -> None:
        """Create every directory in ``paths`` (and parents) in one request (retried: idempotent).

        With ``sandbox`` the request goes to that handle, without recovery, instead of the live
        sandbox; the runtime uses it to create the workspace while it attaches a sandbox.
        """
        entries = [self._entry(p, None, EXECUTABLE_MODE) for p in paths]
        if not entries:
            return

        async def create(target: Sandbox) -> None:
            await target.files.create_directories(entries)

        try:
            if sandbox is None:
                await self._call(create, idempotent=True)
            else:
                await self._call_on(sandbox, create, idempotent=True)
        except Exception as exc:
            raise file_error("creating directory", entries[0].path, exc) from exc

    async def upload_files(
        self, files: Iterable[tuple[Path, str, bool]], *, sandbox: Sandbox | None = None
    ) -> int:
        """Upload host files in batched multipart requests, each file streamed from disk.

        With ``sandbox`` every batch goes to that handle and none is moved to a replacement:
        the runtime uses it to keep all files of one skill in one sandbox (it restarts the
        whole upload when that sandbox vanished).
        """
        count = 0
        for batch in upload_batches(files):
            count += await self._upload_batch(batch, sandbox)
        return count

    async def _upload_batch(
        self, batch: list[tuple[Path, str, bool]], target: Sandbox | None
    ) -> int:
        async def send(sandbox: Sandbox) -> None:
            with contextlib.ExitStack() as stack:
                entries = [
                    self._entry(
                        remote_path,
                        stack.enter_context(open_local(local_path, remote_path)),
                        EXECUTABLE_MODE if executable else FILE_MODE,
                    )
                    for local_path, remote_path, executable in batch
                ]
                await sandbox.files.write_files(entries)

        try:
            if target is None:
                await self._call(send, idempotent=False)
            else:
                await self._call_on(target, send, idempotent=False)
        except RuntimeFileError:
            raise
        except Exception as exc:
            raise file_error("uploading", batch[0][1], exc) from exc
        return len(batch)
