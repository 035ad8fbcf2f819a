"""``AioFileSystem``: the six file-system primitives over the AIO Sandbox file API and shell.

* reads stream ``GET /v1/file/download`` (binary-safe, bounded memory; retried when idempotent)
  after a ``stat`` command confirmed a regular file: a FIFO, socket or device is refused with
  :class:`NotRegularFileError` before the service is asked to open it (it would block);
* writes spool the content on this host (memory up to 1 MiB, then a temporary file), upload it to
  a fresh staging path with ``POST /v1/file/upload`` (multipart, streamed) and move it into place
  with one command that also creates the parents and sets the mode (two requests per write);
* ``stat``, listings, ``delete`` and ``make_directory`` are one small command each, because the
  API has no endpoint for them; every path is shell-quoted.

Listings use GNU ``find -printf``; a name containing a newline is skipped. A failed command is
classified by the reason it printed (commands run with ``LC_ALL=C``): permission denied, not
permitted and read-only file system are :class:`RuntimePermissionError`, "Not a directory" a
:class:`NotADirectoryFileError`, "Is a directory" a :class:`RuntimeIsADirectoryError`. A refused
download of a directory is a :class:`RuntimeIsADirectoryError`.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
import tempfile
from collections.abc import Callable, Generator, Iterable

import httpx

from skillruntime.core.errors import (
    ExecutionTransportError,
    NotADirectoryFileError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
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
from .commands import CommandRunner, CommandSpec
from .errors import AioNotFoundError, AioSandboxError
from .script import WrapperOutcome

__all__ = [
    "LIST_OUTPUT_CAP",
    "QUERY_OUTPUT_CAP",
    "AioFileSystem",
    "checked_outcome",
    "command_failure",
    "delete_script",
    "file_command",
    "list_result",
    "list_script",
    "make_directory_script",
    "marker_script",
    "move_into_place_script",
    "refused_read",
    "refused_read_after_stat",
    "search_complete",
    "stat_result",
    "stat_script",
]

logger = logging.getLogger(__name__)

_SPOOL_MEMORY = 1024 * 1024
_MISSING = 44
"""Exit code of the file commands for a missing path."""
_NOT_A_DIRECTORY = 45
"""Exit code of the listing command for a path below a regular file."""

_C_LOCALE = "export LC_ALL=C; "
"""Prefix of every file command: the system's error texts stay in English, so they can be
classified."""

_REASONS: tuple[tuple[tuple[str, ...], type[RuntimeFileError]], ...] = (
    (
        ("Permission denied", "Operation not permitted", "Read-only file system"),
        RuntimePermissionError,
    ),
    (("Is a directory", "cannot overwrite directory"), RuntimeIsADirectoryError),
    # mkdir -p says "File exists" when the directory to create is a regular file.
    (("Not a directory", "File exists"), NotADirectoryFileError),
    (("No such file or directory",), RuntimeFileNotFoundError),
)
"""The kind of a failed file command, from the ``strerror`` text coreutils prints."""

_PERMISSION_TYPES = frozenset({"permission_denied", "read_only_filesystem"})

_NOT_FOUND_TYPES = frozenset({"not_found", "invalid_target", "is_directory", "not_a_file"})
_FIELDS = "%y\\t%s\\t%T@\\t%m\\t%p\\n"


def _parse_entry(line: str) -> FileInfo | None:
    parts = line.split("\t", 4)
    if len(parts) != 5:
        return None
    kind, size, mtime, mode, path = parts
    try:
        permissions = int(mode, 8)
        size_value = max(int(size), 0)
        modified = float(mtime)
    except ValueError:
        return None
    is_directory = kind == "d"
    return FileInfo(
        path=path,
        is_directory=is_directory,
        size=0 if is_directory else size_value,
        modified_time=modified,
        is_executable=not is_directory and bool(permissions & 0o111),
        is_special=kind not in ("f", "d", "l"),
    )


def file_command(script: str, timeout: float, cap: int) -> CommandSpec:
    """The command of one file operation (C locale, run from ``/``, no environment), keeping
    ``cap`` bytes per stream."""
    return CommandSpec(
        command=_C_LOCALE + script, cwd="/", environment={}, timeout=timeout, cap=cap
    )


def search_complete(outcome: WrapperOutcome) -> bool:
    """Whether a search command succeeded with both streams whole (else walk instead)."""
    if outcome.exit_code != 0:
        logger.debug("search command failed (exit %d); walking instead", outcome.exit_code)
        return False
    if outcome.stdout_size > len(outcome.stdout) or outcome.stderr_size > len(outcome.stderr):
        logger.debug("search output over the cap; walking instead")
        return False
    return True


def checked_outcome(outcome: WrapperOutcome, path: str, timeout: float) -> WrapperOutcome:
    """``outcome``, unless the file command timed out (a :class:`RuntimeFileError`)."""
    if outcome.timed_out:
        raise RuntimeFileError(f"File operation on {path} timed out after {timeout:g}s", path=path)
    return outcome


def command_failure(outcome: WrapperOutcome, what: str, path: str) -> RuntimeFileError:
    """The typed error of a failed file command, classified by the reason it printed."""
    detail = outcome.stderr.decode("utf-8", "replace").strip()[-300:]
    suffix = f": {detail}" if detail else ""
    cls = next(
        (kind for reasons, kind in _REASONS if any(reason in detail for reason in reasons)),
        RuntimeFileError,
    )
    return cls(f"Cannot {what} {path}{suffix}", path=path)


def refused_read(path: str, exc: AioSandboxError) -> RuntimeFileError | None:
    """The typed error of a refused download, or ``None`` when a stat must tell it apart
    (:func:`refused_read_after_stat`): the service's answer for a directory is not documented
    (an image answers 400)."""
    if exc.error_type in _PERMISSION_TYPES or "Permission denied" in str(exc):
        return RuntimePermissionError(f"Cannot read {path}: permission denied", path=path)
    if exc.status != 400 and exc.error_type not in _NOT_FOUND_TYPES:
        return RuntimeFileError(f"Cannot read {path}: {exc}", path=path)
    return None


def refused_read_after_stat(path: str, info: FileInfo | None) -> RuntimeFileError:
    """A refused download of a directory, or of a missing or irregular file."""
    if info is not None and info.is_directory:
        return RuntimeIsADirectoryError(f"Path is a directory, not a file: {path}", path=path)
    return RuntimeFileNotFoundError(f"Not a readable regular file: {path}", path=path)


def move_into_place_script(staging: str, path: str, mode: int) -> str:
    """Move an uploaded ``staging`` file to ``path`` (parents created, ``mode`` set)."""
    q = shlex.quote
    return (
        f"s={q(staging)}; t={q(path)}; "
        f'mkdir -p -- {q(posixpath.dirname(path) or "/")} && mv -fT -- "$s" "$t" '
        f'&& chmod {mode:o} -- "$t" || {{ rm -f -- "$s"; exit 1; }}'
    )


def stat_script(path: str) -> str:
    """Print the entry of ``path`` (a link itself when dangling); exit 44 when missing."""
    q = shlex.quote
    return (
        f'p={q(path)}; if [ -e "$p" ]; then find -H "$p" -maxdepth 0 -printf \'{_FIELDS}\'; '
        f'elif [ -L "$p" ]; then find "$p" -maxdepth 0 -printf \'{_FIELDS}\'; '
        f"else exit {_MISSING}; fi"
    )


def stat_result(outcome: WrapperOutcome, path: str) -> FileInfo | None:
    """The answer of :func:`stat_script`."""
    if outcome.exit_code == _MISSING:
        return None
    if outcome.exit_code != 0:
        raise command_failure(outcome, "stat", path)
    text = outcome.stdout.decode("utf-8", "replace").rstrip("\n")
    info = _parse_entry(text)
    if info is None:
        raise RuntimeFileError(f"Unexpected stat answer for {path}", path=path)
    return info.model_copy(update={"path": path})


def list_script(path: str, depth: int, limit: int) -> str:
    """List ``path`` down to ``depth`` (at least 1), at most ``limit`` entries."""
    q = shlex.quote
    return (
        f'p={q(path)}; if [ -d "$p" ]; then '
        f"find -H \"$p\" -mindepth 1 -maxdepth {int(depth)} -printf '{_FIELDS}' "
        f"| LC_ALL=C sort -t '\t' -k5 | head -n {int(limit)}; "
        f'elif [ -e "$p" ] || [ -L "$p" ]; then find "$p" -maxdepth 0 -printf \'{_FIELDS}\'; '
        # Missing: below a regular file (the nearest existing ancestor) or simply absent.
        f'else a="$p"; while a=$(dirname -- "$a"); [ "$a" != / ] && [ ! -e "$a" ]; do :; '
        f'done; [ -d "$a" ] || exit {_NOT_A_DIRECTORY}; exit {_MISSING}; fi'
    )


def list_result(outcome: WrapperOutcome, path: str, limit: int) -> list[FileInfo]:
    """The answer of :func:`list_script`."""
    if outcome.exit_code == _MISSING:
        raise RuntimeFileNotFoundError(f"Path does not exist: {path}", path=path)
    if outcome.exit_code == _NOT_A_DIRECTORY:
        raise NotADirectoryFileError(
            f"Cannot list {path}: a component of the path is not a directory", path=path
        )
    if outcome.exit_code != 0:
        raise command_failure(outcome, "list", path)
    entries = []
    for line in outcome.stdout.decode("utf-8", "replace").split("\n"):
        if line:
            info = _parse_entry(line)
            if info is not None:
                entries.append(info)
    if len(entries) == 1 and entries[0].path == path and not entries[0].is_directory:
        return entries
    entries.sort(key=lambda item: item.path)
    return entries[:limit]


def delete_script(path: str) -> str:
    """Delete ``path`` recursively; the root directory is refused."""
    if path.rstrip("/") in ("", "/"):
        raise RuntimeFileError("Refusing to delete the root directory", path=path)
    return f"rm -rf -- {shlex.quote(path)}"


def make_directory_script(path: str) -> str:
    """Create ``path`` and its parents."""
    return f"mkdir -p -- {shlex.quote(path)}"


def marker_script(path: str, text: str) -> str:
    """Write the small text file ``path`` (parents created)."""
    q = shlex.quote
    return f"mkdir -p -- {q(posixpath.dirname(path) or '/')} && printf '%s' {q(text)} > {q(path)}"


LIST_OUTPUT_CAP = 64 * 1024 * 1024
"""Bytes of a listing kept per stream."""

QUERY_OUTPUT_CAP = 1024 * 1024
"""Bytes of the other file commands' output kept per stream."""


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

    @staticmethod
    def _failure(outcome: WrapperOutcome, what: str, path: str) -> RuntimeFileError:
        """The typed error of a failed file command, classified by the reason it printed."""
        return command_failure(outcome, what, path)

    # ------------------------------------------------------------------ reads

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        self._require_regular_file(path)
        try:
            response = self._client.open_stream("/v1/file/download", params={"path": path})
        except AioNotFoundError as exc:
            raise RuntimeFileNotFoundError(f"File not found: {path}", path=path) from exc
        except AioSandboxError as exc:
            raise self._read_error(path, exc) from exc
        try:
            for chunk in response.iter_bytes(chunk_size):
                if chunk:
                    yield chunk
        except httpx.HTTPError as exc:
            raise RuntimeFileError(
                f"Reading {path} from the AIO Sandbox failed: {type(exc).__name__}", path=path
            ) from exc
        finally:
            response.close()

    def _require_regular_file(self, path: str) -> None:
        """Refuse a missing path, a directory or a non-regular file before it is opened."""
        info = self.stat(path)  # follows a final symbolic link, as the download does
        if info is None:
            raise RuntimeFileNotFoundError(f"File not found: {path}", path=path)
        if info.is_directory:
            raise RuntimeIsADirectoryError(f"Cannot read {path}: it is a directory", path=path)
        if info.is_special:
            raise NotRegularFileError(
                f"Cannot read {path}: not a regular file (a FIFO, socket or device)", path=path
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

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY) as spool:
            size = 0
            for chunk in chunks:
                spool.write(chunk)
                size += len(chunk)
            spool.seek(0)
            self.put_file(spool, size, path, mode=0o755 if executable else 0o644)
        return size

    def put_file(
        self, source: tempfile.SpooledTemporaryFile[bytes], size: int, path: str, *, mode: int
    ) -> None:
        """Upload ``size`` bytes of ``source`` to ``path`` (parents created, ``mode`` set)."""
        staging = self._runner.staging_path()
        try:
            self._client.upload(
                staging, source, size, idempotent=True, read_timeout=self._transfer_timeout
            )
        except AioSandboxError as exc:
            raise RuntimeFileError(f"Cannot upload {path}: {exc}", path=path) from exc
        script = move_into_place_script(staging, path, mode)
        outcome = self._command(script, path, retry_safe=False)
        if outcome.exit_code != 0:
            raise self._failure(outcome, "write", path)

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
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
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
        outcome = self._command(delete_script(path), path, retry_safe=False)
        if outcome.exit_code != 0:
            raise self._failure(outcome, "delete", path)

    def make_directory(self, path: str) -> None:
        outcome = self._command(make_directory_script(path), path, retry_safe=False)
        if outcome.exit_code != 0:
            raise self._failure(outcome, "create directory", path)

    def write_marker(self, path: str, text: str) -> None:
        """Write a small text file with one command (parents created)."""
        script = marker_script(path, text)
        outcome = self._command(script, path, retry_safe=False)
        if outcome.exit_code != 0:
            raise self._failure(outcome, "write", path)
