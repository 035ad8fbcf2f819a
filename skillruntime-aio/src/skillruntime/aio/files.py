# Generated from async_files.py by scripts/generate_sync.py: do not edit.
# Edit the async source, then run `python scripts/generate_sync.py`.
"""``AioFileSystem``: the six file-system primitives over the AIO Sandbox file API and shell.

``skillruntime.aio.async_files`` is the source of both faces: ``skillruntime.aio.files``
(``AioFileSystem``) is generated from it by ``scripts/generate_sync.py``; the command scripts,
answer parsing and error typing are :mod:`.file_rules`, shared.

* reads stream ``GET /v1/file/download`` (binary-safe, bounded memory; retried when
  idempotent); both faces first confirm a regular file with a ``stat`` command: a FIFO,
  socket or device is refused with :class:`NotRegularFileError` before the service is asked to
  open it (it would block);
* writes spool the content on this host (memory up to 1 MiB, then a temporary file, written in
  a worker thread on the async face), upload it to a fresh staging path with
  ``POST /v1/file/upload`` (multipart, streamed) and move it into place with one command that
  also creates the parents and sets the mode (two requests per write);
* ``stat``, listings, ``delete`` and ``make_directory`` are one small command each, because the
  API has no endpoint for them; every path is shell-quoted.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Generator, Iterable
from typing import IO, TypeAlias

import httpx

from skillruntime.core.errors import (
    ExecutionTransportError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    printable,
)
from skillruntime.core.files.globbing import GlobMatcher
from skillruntime.core.files.search import (
    GlobQuery,
    GrepEngine,
    GrepQuery,
    GrepResult,
    SearchResult,
)
from skillruntime.core.files.search_command import (
    glob_from_listing,
    grep_from_output,
    parse_glob_output,
    parse_grep_output,
    search_script,
)
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import FileInfo

from .client import AioClient
from .commands import CommandRunner
from .errors import AioNotFoundError, AioSandboxError
from .file_rules import (
    LIST_OUTPUT_CAP,
    QUERY_OUTPUT_CAP,
    checked_outcome,
    command_failure,
    delete_script,
    file_command,
    list_result,
    list_script,
    make_directory_script,
    marker_script,
    move_into_place_script,
    refused_read,
    refused_read_after_stat,
    search_complete,
    stat_result,
    stat_script,
    undownloadable_path,
)
from .script import WrapperOutcome

__all__ = ["AioFileSystem"]

logger = logging.getLogger(__name__)

_SPOOL_MEMORY = 1024 * 1024

_Chunks: TypeAlias = Iterable[bytes]
_ReadText: TypeAlias = Callable[[str, int], str]


class AioFileSystem(SkillRuntimeFileSystem):
    """Unscoped file access on the service (see the module docs); paths are absolute.

    ``query_timeout`` bounds the file commands, ``transfer_timeout`` the read timeout of uploads.
    """

    def __init__(
        self,
        client: AioClient,
        runner: CommandRunner,
        *,
        query_timeout: float = 60.0,
        transfer_timeout: float = 600.0,
    ) -> None:
        self._client = client
        self._runner = runner
        self._query_timeout = query_timeout
        self._transfer_timeout = transfer_timeout

    # ---------------------------------------------------------------- helpers

    def _command(
        self, script: str, path: str, *, retry_safe: bool, cap: int = QUERY_OUTPUT_CAP
    ) -> WrapperOutcome:
        spec = file_command(script, self._query_timeout, cap)
        try:
            outcome = self._runner.run(spec, retry_safe=retry_safe)
        except ExecutionTransportError as exc:
            raise RuntimeFileError(str(exc), path=path) from exc
        return checked_outcome(outcome, path, self._query_timeout)

    def _change(self, script: str, what: str, path: str) -> None:
        outcome = self._command(script, path, retry_safe=False)
        if outcome.exit_code != 0:
            raise self._failure(outcome, what, path)

    @staticmethod
    def _failure(outcome: WrapperOutcome, what: str, path: str) -> RuntimeFileError:
        """The typed error of a failed file command, classified by the reason it printed."""
        return command_failure(outcome, what, path)

    # ------------------------------------------------------------------ reads

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None]:
        unaddressable = undownloadable_path(path)
        if unaddressable is not None:
            raise unaddressable
        self._require_regular_file(path)
        try:
            response = self._client.open_stream("/v1/file/download", params={"path": path})
        except AioNotFoundError as exc:
            raise RuntimeFileNotFoundError(f"File not found: {printable(path)}", path=path) from exc
        except AioSandboxError as exc:
            raise self._read_error(path, exc) from exc
        try:
            try:
                for chunk in response.iter_bytes(chunk_size):
                    if chunk:
                        yield chunk
            except httpx.HTTPError as exc:
                raise self._client.transport_failure("/v1/file/download", exc) from exc
        except AioSandboxError as exc:  # the answer broke off (or stalled) after its headers
            raise RuntimeFileError(
                f"Cannot read {printable(path)}: {printable(str(exc))}", path=path
            ) from exc
        finally:
            response.close()

    def _require_regular_file(self, path: str) -> None:
        """Refuse a missing path, a directory or a non-regular file before it is opened (the
        download would block on it)."""
        info = self.stat(path)  # follows a final symbolic link, as the download does
        if info is None:
            raise RuntimeFileNotFoundError(f"File not found: {printable(path)}", path=path)
        if info.is_directory:
            raise RuntimeIsADirectoryError(
                f"Cannot read {printable(path)}: it is a directory", path=path
            )
        if info.is_special:
            raise NotRegularFileError(
                f"Cannot read {printable(path)}: not a regular file (a FIFO, socket or device)",
                path=path,
            )

    def _read_error(self, path: str, exc: AioSandboxError) -> RuntimeFileError:
        """The typed error of a refused download (a stat tells a directory apart)."""
        error = refused_read(path, exc)
        if error is not None:
            return error
        try:
            info = self.stat(path)
        except RuntimeFileError:
            info = None
        return refused_read_after_stat(path, info)

    # ----------------------------------------------------------------- writes

    def write_stream(self, path: str, chunks: _Chunks, *, executable: bool = False) -> int:
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY) as spool:
            size = 0
            stream = chunks
            for chunk in stream:
                spool.write(chunk)
                size += len(chunk)
            spool.seek(0)
            self.put_file(spool, size, path, mode=0o755 if executable else 0o644)
        return size

    def put_file(self, source: IO[bytes], size: int, path: str, *, mode: int) -> None:
        """Upload ``size`` bytes of ``source`` to ``path`` (parents created, ``mode`` set)."""
        staging = self._runner.staging_path()
        try:
            self._client.upload(
                staging, source, size, idempotent=True, read_timeout=self._transfer_timeout
            )
        except AioSandboxError as exc:
            raise RuntimeFileError(
                f"Cannot upload {printable(path)}: {printable(str(exc))}", path=path
            ) from exc
        self._change(move_into_place_script(staging, path, mode), "write", path)

    # --------------------------------------------------------------- metadata

    def stat(self, path: str) -> FileInfo | None:
        return stat_result(self._command(stat_script(path), path, retry_safe=True), path)

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        if limit <= 0:
            return []
        script = list_script(path, max(depth, 1), limit)
        outcome = self._command(script, path, retry_safe=True, cap=LIST_OUTPUT_CAP)
        return list_result(outcome, path, limit)

    # ---------------------------------------------------------------- search

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One command for the whole walk (see :mod:`skillruntime.core.files.search_command`)."""
        if not root.is_directory or root.is_special:
            return super().glob(root, query)
        GlobMatcher(query.pattern)  # a bad pattern fails before any request
        outcome = self._command(
            search_script(root.path, query.max_depth, content=None),
            root.path,
            retry_safe=True,
            cap=LIST_OUTPUT_CAP,
        )
        listing = parse_glob_output(outcome.stdout) if search_complete(outcome) else None
        if listing is None:
            return super().glob(root, query)
        return glob_from_listing(listing, root, query)

    def grep(
        self, root: FileInfo, query: GrepQuery, *, read_text: _ReadText | None = None
    ) -> GrepResult:
        """One command for the walk and the candidate files (see
        :mod:`skillruntime.core.files.search_command`)."""
        if not root.is_directory or root.is_special:
            return super().grep(root, query, read_text=read_text)
        GrepEngine(query, root.path)  # a bad pattern or glob fails before any request
        outcome = self._command(
            search_script(root.path, query.max_depth, content=query),
            root.path,
            retry_safe=True,
            cap=LIST_OUTPUT_CAP,
        )
        found = (
            parse_grep_output(outcome.stdout, outcome.stderr) if search_complete(outcome) else None
        )
        if found is None:
            return super().grep(root, query, read_text=read_text)
        listing, contents = found
        return grep_from_output(listing, contents, root, query, read_text or self.read_text)

    # ---------------------------------------------------------------- changes

    def delete(self, path: str) -> None:
        self._change(delete_script(path), "delete", path)

    def make_directory(self, path: str) -> None:
        self._change(make_directory_script(path), "create directory", path)

    def write_marker(self, path: str, text: str) -> None:
        """Write a small text file with one command (parents created)."""
        self._change(marker_script(path, text), "write", path)
