""":class:`SkillRuntimeBackend`: deepagents' ``SandboxBackendProtocol`` over any runtime.

Every operation goes through the runtime's SPI: ``execute`` through
:meth:`~skillruntime.core.runtime.spi.SkillRuntime.execute`, the file operations (``ls``, ``read``,
``write``, ``edit``, ``delete``, ``glob``, ``grep``, ``upload_files``, ``download_files``) through
its file system — never deepagents' generic scripts over ``execute``, so no ``python3`` is needed
in the sandbox and a conversation workspace's path rules apply to every call (a path outside it is
refused before any backend call). Results, messages and pagination follow deepagents' own
sandbox backend; where this backend differs, the docs say so (``docs/deepagents.md``).

Async methods (``aexecute``, ``aread``, …) are native when an
:class:`~skillruntime.core.runtime.async_spi.AsyncSkillRuntime` is given (``async_runtime``, sharing
the sync runtime's execution boundary: the same conversation, or the same service); otherwise they
run the sync method in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from deepagents.backends.protocol import (
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
)
from deepagents.backends.protocol import FileInfo as DeepAgentsFileInfo

from skillruntime.core.errors import (
    FileTooLargeError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    SkillRuntimeError,
)
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.files.globbing import GlobMatcher, relative_path
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    DEFAULT_MAX_OUTPUT_BYTES,
    FileInfo,
    SkillExecutionRequest,
    SkillExecutionResult,
)
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime

from .reading import (
    EMPTY_CONTENT_WARNING,
    EMPTY_OLD_STRING_ERROR,
    MAX_BINARY_BYTES,
    LineWindow,
    binary_read,
    binary_too_large,
    edit_failure,
    error_code,
    find_literal,
    looks_binary,
    replace_text,
)

if TYPE_CHECKING:
    from .skills import RuntimeSkills

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "GREP_TIME_BUDGET_SECONDS",
    "MAX_SEARCH_FILES",
    "MAX_SEARCH_FILE_BYTES",
    "TIMEOUT_EXIT_CODE",
    "SkillRuntimeBackend",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS: Final = 120.0
"""Timeout of a command that names none (deepagents' local shell default)."""

MAX_TIMEOUT_SECONDS: Final = 3600.0
"""The timeout of ``execute(timeout=0)`` ("no timeout"): commands are always bounded here."""

TIMEOUT_EXIT_CODE: Final = 124
"""Exit code reported for a command killed at its timeout (the convention of ``timeout(1)``)."""

MAX_SEARCH_FILES: Final = 10_000
"""``glob`` and ``grep`` look at no more than this many files per call (then ``truncated``)."""

MAX_SEARCH_FILE_BYTES: Final = 10 * 1024 * 1024
"""``grep`` skips larger files (and reports ``truncated``); memory holds one file at a time."""

GREP_TIME_BUDGET_SECONDS: Final = 15.0
"""Wall-clock budget of one ``grep`` (deepagents' grep timeout); past it results are partial."""

_WALK_LIST_LIMIT: Final = 100_000
_NO_CAP: Final = 1 << 62
_SEARCH_SKIPPED: Final = frozenset({".git"})
"""Directories ``grep`` and ``glob`` never enter below their root (deepagents skips ``.git``)."""

_T = TypeVar("_T")

_FileSystemCall = tuple[str, tuple[object, ...]]
"""One file-system call of a plan: a method name of the runtime's file system and its arguments."""

_FileSystemPlan = Generator[_FileSystemCall, Any, _T]
"""A search written once for both file systems: it yields the calls it needs and receives each
result (or has the call's error raised at the ``yield``); :func:`_run_plan` drives it on a sync
file system, :func:`_arun_plan` on an async one."""


def _run_plan(files: SkillRuntimeFileSystem, plan: _FileSystemPlan[_T]) -> _T:
    """Run ``plan`` against the sync file system ``files`` and return its result."""
    try:
        name, args = next(plan)
        while True:
            try:
                result = getattr(files, name)(*args)
            except Exception as exc:
                name, args = plan.throw(exc)
            else:
                name, args = plan.send(result)
    except StopIteration as stop:
        done: _T = stop.value
        return done


async def _arun_plan(files: AsyncSkillRuntimeFileSystem, plan: _FileSystemPlan[_T]) -> _T:
    """Run ``plan`` against the async file system ``files`` and return its result."""
    try:
        name, args = next(plan)
        while True:
            try:
                result = await getattr(files, name)(*args)
            except Exception as exc:
                name, args = plan.throw(exc)
            else:
                name, args = plan.send(result)
    except StopIteration as stop:
        done: _T = stop.value
        return done


def _checked_path(path: str) -> str:
    """The normalised runtime path of an absolute ``path``; :class:`ValueError` otherwise."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError("path must be absolute")
    if "\0" in path:
        raise ValueError("path contains a NUL byte")
    normalised = posixpath.normpath(path)
    return "/" + normalised.lstrip("/")


def _ls_entry(info: FileInfo) -> DeepAgentsFileInfo:
    entry: DeepAgentsFileInfo = {"path": info.path, "is_dir": info.is_directory}
    if not info.is_directory:
        entry["size"] = info.size
    if info.modified_time is not None:
        entry["modified_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.modified_time))
    return entry


def _execute_response(result: SkillExecutionResult, timeout: float) -> ExecuteResponse:
    output = result.stdout
    if result.stderr:
        output = (
            f"{output}\n{result.stderr}"
            if output and not output.endswith("\n")
            else (output + result.stderr)
        )
    truncated = result.stdout_truncated or result.stderr_truncated
    if result.timed_out:
        note = f"Error: Command timed out after {timeout:g} seconds."
        output = f"{output}\n{note}" if output else note
        return ExecuteResponse(output=output, exit_code=TIMEOUT_EXIT_CODE, truncated=truncated)
    return ExecuteResponse(output=output, exit_code=result.exit_code, truncated=truncated)


def _ls_failure(path: str, error: BaseException) -> LsResult:
    code = error_code(error)
    return LsResult(
        error=f"Path '{path}': {'path_not_found' if code == 'file_not_found' else code}"
    )


def _read_failure(path: str, error: BaseException) -> ReadResult:
    return ReadResult(error=f"File '{path}': {error_code(error)}")


class _GlobFilter:
    """deepagents' glob contract on top of the core matcher: a leading ``/`` anchors the pattern
    to the search root (so it matches whole relative paths), a pattern without ``/`` matches file
    names at any depth, and a name starting with ``.`` matches only a segment that starts with
    ``.`` (``**`` never enters dot-directories)."""

    def __init__(self, pattern: str) -> None:
        anchored = pattern.startswith("/")
        text = pattern.lstrip("/") if anchored else pattern
        self._by_name = "/" not in text and not anchored
        self._matcher = GlobMatcher(text)
        self._segments = text.split("/")

    def matches(self, relative: str) -> bool:
        parts = relative.split("/")
        if self._by_name:
            if parts[-1].startswith(".") and not self._segments[-1].startswith("."):
                return False
            return self._matcher.matches(parts[-1])
        explicit_dots = any(segment.startswith(".") for segment in self._segments)
        if not explicit_dots and any(part.startswith(".") for part in parts):
            return False
        return self._matcher.matches(relative)


class SkillRuntimeBackend(SandboxBackendProtocol):
    """A deepagents sandbox backend whose commands and files live in a skillruntime runtime.

    ``runtime`` serves the sync methods; ``async_runtime`` (optional, same execution boundary)
    serves the async ones natively. The backend does not own either: closing them is the
    caller's business (``with runtime:``), so one runtime can serve several agents.

    ``default_timeout`` applies to ``execute`` without a timeout; ``timeout=0`` means
    :data:`MAX_TIMEOUT_SECONDS`. ``max_output_bytes`` bounds each output stream (head and tail kept,
    ``truncated`` set). ``max_download_bytes`` bounds one downloaded file and ``max_edit_bytes``
    the file an ``edit`` rewrites (it is read, changed and written back in place: nothing is staged
    anywhere else). ``skills`` (see :class:`~skillruntime.deepagents.skills.RuntimeSkills`) are
    offered to deepagents' skills middleware from :attr:`skill_sources`.
    """

    def __init__(
        self,
        runtime: SkillRuntime,
        *,
        async_runtime: AsyncSkillRuntime | None = None,
        sandbox_id: str | None = None,
        default_timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_download_bytes: int = 64 * 1024 * 1024,
        max_edit_bytes: int = 10 * 1024 * 1024,
        skills: RuntimeSkills | None = None,
    ) -> None:
        if default_timeout <= 0:
            raise ValueError("default_timeout must be greater than zero")
        if max_download_bytes <= 0 or max_edit_bytes <= 0:
            raise ValueError("max_download_bytes and max_edit_bytes must be greater than zero")
        self._runtime = runtime
        self._async_runtime = async_runtime
        self._id = sandbox_id or f"skillruntime-{runtime.name}-{uuid.uuid4().hex[:12]}"
        self._default_timeout = float(default_timeout)
        self._max_output_bytes = max_output_bytes
        self._max_download_bytes = max_download_bytes
        self._max_edit_bytes = max_edit_bytes
        self._skills = skills
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ identity

    @property
    def id(self) -> str:
        """The sandbox id given at construction, or ``skillruntime-<runtime>-<random>``."""
        return self._id

    @property
    def runtime(self) -> SkillRuntime:
        """The sync runtime behind the backend."""
        return self._runtime

    @property
    def async_runtime(self) -> AsyncSkillRuntime | None:
        """The async runtime serving the ``a*`` methods natively, if one was given."""
        return self._async_runtime

    @property
    def skills(self) -> RuntimeSkills | None:
        """The skills offered to the agent, if any."""
        return self._skills

    @property
    def skill_sources(self) -> list[str]:
        """Skill sources for ``create_deep_agent(skills=...)`` or ``SkillsMiddleware``: one
        directory in the runtime whose ``<name>/SKILL.md`` entries stand for the configured skills
        (written on first access; see :class:`~skillruntime.deepagents.skills.RuntimeSkills`)."""
        if self._skills is None:
            return []
        return [self._skills.install(self)]

    def _files(self) -> SkillRuntimeFileSystem:
        return self._runtime.get_file_system()

    async def _afiles(self) -> AsyncSkillRuntimeFileSystem:
        assert self._async_runtime is not None
        return await self._async_runtime.get_file_system()

    # ------------------------------------------------------------------ execute

    def _request(self, command: str, timeout: int | None) -> tuple[SkillExecutionRequest, float]:
        seconds = self._default_timeout if timeout is None else float(timeout)
        if seconds < 0:
            raise ValueError("timeout must not be negative")
        if seconds == 0:
            seconds = MAX_TIMEOUT_SECONDS
        request = SkillExecutionRequest(
            command=command, timeout_seconds=seconds, max_output_bytes=self._max_output_bytes
        )
        return request, seconds

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` in the runtime's default working directory.

        Output is stdout followed by stderr. A non-zero exit is a result; a timeout kills the
        command's process tree and is reported as exit code :data:`TIMEOUT_EXIT_CODE` with
        ``Error: Command timed out after N seconds.`` after the output produced so far. A transport
        failure raises :class:`~skillruntime.core.errors.SkillRuntimeError` (commands are never
        retried: they may have side effects).
        """
        request, seconds = self._request(command, timeout)
        return _execute_response(self._runtime.execute(request), seconds)

    async def aexecute(
        self,
        command: str,
        *,
        timeout: int | None = None,
    ) -> ExecuteResponse:
        """Async :meth:`execute`; cancelling the awaiting task stops the command (native)."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.execute, command, timeout=timeout)
        request, seconds = self._request(command, timeout)
        return _execute_response(await self._async_runtime.execute(request), seconds)

    # ------------------------------------------------------------------ upload / download

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each ``(absolute path, bytes)``; one response per file, in order.

        Parents are created. A relative path is ``invalid_path``; failures carry deepagents'
        codes (``permission_denied``, ``is_directory``, ``invalid_path``, ``file_not_found``).
        """
        fs = self._files()
        responses: list[FileUploadResponse] = []
        for path, content in files:
            try:
                if self._skills is not None and self._skills.is_read_only(_checked_path(path)):
                    raise PermissionError(path)
                fs.write_bytes(_checked_path(path), content)
            except (SkillRuntimeError, ValueError, PermissionError) as exc:
                code = "permission_denied" if isinstance(exc, PermissionError) else None
                responses.append(FileUploadResponse(path=path, error=code or error_code(exc)))
            else:
                responses.append(FileUploadResponse(path=path, error=None))
        return responses

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async :meth:`upload_files`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.upload_files, files)
        fs = await self._afiles()
        responses: list[FileUploadResponse] = []
        for path, content in files:
            try:
                if self._skills is not None and self._skills.is_read_only(_checked_path(path)):
                    raise PermissionError(path)
                await fs.write_bytes(_checked_path(path), content)
            except (SkillRuntimeError, ValueError, PermissionError) as exc:
                code = "permission_denied" if isinstance(exc, PermissionError) else None
                responses.append(FileUploadResponse(path=path, error=code or error_code(exc)))
            else:
                responses.append(FileUploadResponse(path=path, error=None))
        return responses

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each file (at most ``max_download_bytes``); one response per path, in order.

        A directory is ``is_directory``, a missing file ``file_not_found``, a relative path
        ``invalid_path``; a file over the limit ``file_too_large``.
        """
        fs = self._files()
        responses: list[FileDownloadResponse] = []
        for path in paths:
            try:
                target = _checked_path(path)
                content = fs.read_bytes(target, self._max_download_bytes)
            except RuntimeFileNotFoundError as exc:
                code = error_code(exc)
                if not isinstance(exc, RuntimeIsADirectoryError):
                    with contextlib.suppress(SkillRuntimeError):
                        info = fs.stat(target)
                        if info is not None and info.is_directory:
                            code = "is_directory"
                responses.append(FileDownloadResponse(path=path, error=code))
            except (SkillRuntimeError, ValueError) as exc:
                responses.append(FileDownloadResponse(path=path, error=error_code(exc)))
            else:
                responses.append(FileDownloadResponse(path=path, content=content))
        return responses

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async :meth:`download_files`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.download_files, paths)
        fs = await self._afiles()
        responses: list[FileDownloadResponse] = []
        for path in paths:
            try:
                target = _checked_path(path)
                content = await fs.read_bytes(target, self._max_download_bytes)
            except RuntimeFileNotFoundError as exc:
                code = error_code(exc)
                if not isinstance(exc, RuntimeIsADirectoryError):
                    with contextlib.suppress(SkillRuntimeError):
                        info = await fs.stat(target)
                        if info is not None and info.is_directory:
                            code = "is_directory"
                responses.append(FileDownloadResponse(path=path, error=code))
            except (SkillRuntimeError, ValueError) as exc:
                responses.append(FileDownloadResponse(path=path, error=error_code(exc)))
            else:
                responses.append(FileDownloadResponse(path=path, content=content))
        return responses

    # ------------------------------------------------------------------ ls

    def ls(self, path: str) -> LsResult:
        """The entries directly inside the directory ``path`` (``path``, ``is_dir``, ``size``,
        ``modified_at``); errors ``path_not_found``, ``not_a_directory``, ``permission_denied``,
        ``invalid_path``."""
        try:
            target = _checked_path(path)
            entries = self._files().list_directory(target, 1, _WALK_LIST_LIMIT)
        except (SkillRuntimeError, ValueError) as exc:
            return _ls_failure(path, exc)
        return self._ls_result(path, target, entries)

    async def als(self, path: str) -> LsResult:
        """Async :meth:`ls`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.ls, path)
        try:
            target = _checked_path(path)
            entries = await (await self._afiles()).list_directory(target, 1, _WALK_LIST_LIMIT)
        except (SkillRuntimeError, ValueError) as exc:
            return _ls_failure(path, exc)
        return self._ls_result(path, target, entries)

    @staticmethod
    def _ls_result(path: str, target: str, entries: list[FileInfo]) -> LsResult:
        if len(entries) == 1 and not entries[0].is_directory and entries[0].path == target:
            return LsResult(error=f"Path '{path}': not_a_directory")
        return LsResult(entries=[_ls_entry(info) for info in entries])

    # ------------------------------------------------------------------ read

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """The lines ``offset`` (0-based) to ``offset + limit`` of a text file, or a binary file
        as base64 (at most 500 KiB), with deepagents' pagination fields and messages.

        Only the page is kept in memory; files up to 1 MiB are read to the end to count their
        lines, larger ones stop after the page.
        """
        offset, limit = max(0, int(offset)), max(0, int(limit))
        if self._skills is not None:
            activated = self._skills.activate_on_read(self, file_path, offset, limit)
            if activated is not None:
                return activated
        try:
            target = _checked_path(file_path)
            fs = self._files()
            info = fs.stat(target)
            early = self._read_precheck(file_path, info, limit)
            if early is not None:
                return early
            assert info is not None
            with contextlib.closing(fs.read_stream(target)) as stream:
                return self._read_stream(file_path, info, offset, limit, stream)
        except (SkillRuntimeError, ValueError) as exc:
            return _read_failure(file_path, exc)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Async :meth:`read`."""
        if self._async_runtime is None or (
            self._skills is not None and self._skills.is_stub(file_path)
        ):
            return await asyncio.to_thread(self.read, file_path, offset, limit)
        offset, limit = max(0, int(offset)), max(0, int(limit))
        try:
            target = _checked_path(file_path)
            fs = await self._afiles()
            info = await fs.stat(target)
            early = self._read_precheck(file_path, info, limit)
            if early is not None:
                return early
            assert info is not None
            stream = fs.read_stream(target)
            try:
                return await self._aread_stream(file_path, info, offset, limit, stream)
            finally:
                await stream.aclose()
        except (SkillRuntimeError, ValueError) as exc:
            return _read_failure(file_path, exc)

    @staticmethod
    def _read_precheck(path: str, info: FileInfo | None, limit: int) -> ReadResult | None:
        if info is None:
            return ReadResult(error=f"File '{path}': file_not_found")
        if info.is_directory or info.is_special:
            return ReadResult(error=f"File '{path}': not_a_file")
        if info.size == 0:
            return ReadResult(file_data={"content": EMPTY_CONTENT_WARNING, "encoding": "utf-8"})
        return None

    @staticmethod
    def _read_binary_or_window(
        path: str, info: FileInfo, first: bytes, offset: int, limit: int
    ) -> ReadResult | LineWindow:
        if looks_binary(path, first):
            if info.size > MAX_BINARY_BYTES:
                return binary_too_large(path)
            return LineWindow(offset=0, limit=-1, size=info.size)  # marker: collect bytes
        if limit <= 0:
            return ReadResult(
                file_data={"content": "", "encoding": "utf-8"}, no_lines_requested=True
            )
        return LineWindow(offset=offset, limit=limit, size=info.size)

    def _read_stream(
        self,
        path: str,
        info: FileInfo,
        offset: int,
        limit: int,
        stream: Generator[bytes, None, None],
    ) -> ReadResult:
        first = b""
        for chunk in stream:
            first += chunk
            if len(first) >= 8192:
                break
        decided = self._read_binary_or_window(path, info, first, offset, limit)
        if isinstance(decided, ReadResult):
            return decided
        if decided.limit < 0:
            data = bytearray(first)
            for chunk in stream:
                data.extend(chunk)
                if len(data) > MAX_BINARY_BYTES:
                    return binary_too_large(path)
            return binary_read(path, bytes(data))
        try:
            consumed = len(first)
            if first and decided.feed(first):
                return self._early_result(path, decided, consumed, info, stream_done=False)
            for chunk in stream:
                consumed += len(chunk)
                if decided.feed(chunk):
                    return self._early_result(path, decided, consumed, info, stream_done=False)
            decided.finish()
        except UnicodeDecodeError:
            return ReadResult(error=f"File '{path}': not_a_text_file")
        return decided.result(path)

    async def _aread_stream(
        self,
        path: str,
        info: FileInfo,
        offset: int,
        limit: int,
        stream: AsyncGenerator[bytes, None],
    ) -> ReadResult:
        first = b""
        async for chunk in stream:
            first += chunk
            if len(first) >= 8192:
                break
        decided = self._read_binary_or_window(path, info, first, offset, limit)
        if isinstance(decided, ReadResult):
            return decided
        if decided.limit < 0:
            data = bytearray(first)
            async for chunk in stream:
                data.extend(chunk)
                if len(data) > MAX_BINARY_BYTES:
                    return binary_too_large(path)
            return binary_read(path, bytes(data))
        try:
            consumed = len(first)
            if first and decided.feed(first):
                return self._early_result(path, decided, consumed, info, stream_done=False)
            async for chunk in stream:
                consumed += len(chunk)
                if decided.feed(chunk):
                    return self._early_result(path, decided, consumed, info, stream_done=False)
            decided.finish()
        except UnicodeDecodeError:
            return ReadResult(error=f"File '{path}': not_a_text_file")
        return decided.result(path)

    @staticmethod
    def _early_result(
        path: str, window: LineWindow, consumed: int, info: FileInfo, *, stream_done: bool
    ) -> ReadResult:
        """The page of a large file filled before its end: the total is known only when the
        page ended exactly at the end of the file."""
        if (stream_done or consumed >= info.size) and window.stopped_at_end():
            window.finish()
        return window.result(path)

    # ------------------------------------------------------------------ write / edit / delete

    def write(self, file_path: str, content: str) -> WriteResult:
        """Write ``content`` (UTF-8) to ``file_path``, creating parents and replacing an existing
        file — deepagents' contract (its sandbox backend overwrites too)."""
        try:
            target = _checked_path(file_path)
            if self._skills is not None and self._skills.is_read_only(target):
                return WriteResult(error=f"Failed to write file '{file_path}': permission_denied")
            self._files().write_bytes(target, content.encode("utf-8"))
        except (SkillRuntimeError, ValueError) as exc:
            return WriteResult(error=f"Failed to write file '{file_path}': {error_code(exc)}")
        return WriteResult(path=file_path)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """Async :meth:`write`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.write, file_path, content)
        try:
            target = _checked_path(file_path)
            if self._skills is not None and self._skills.is_read_only(target):
                return WriteResult(error=f"Failed to write file '{file_path}': permission_denied")
            await (await self._afiles()).write_bytes(target, content.encode("utf-8"))
        except (SkillRuntimeError, ValueError) as exc:
            return WriteResult(error=f"Failed to write file '{file_path}': {error_code(exc)}")
        return WriteResult(path=file_path)

    def _edited(
        self, file_path: str, raw: bytes, old_string: str, new_string: str, replace_all: bool
    ) -> tuple[bytes, int] | EditResult:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return edit_failure("not_a_text_file", file_path, old_string)
        replaced = replace_text(text, old_string, new_string, replace_all=replace_all)
        if isinstance(replaced, str):
            return edit_failure(replaced, file_path, old_string)
        return replaced[0].encode("utf-8"), replaced[1]

    @staticmethod
    def _edit_error(file_path: str, old_string: str, exc: BaseException) -> EditResult:
        if isinstance(exc, FileTooLargeError):
            return EditResult(
                error=f"Error editing file '{file_path}': file_too_large (over {exc.limit} bytes)"
            )
        code = error_code(exc)
        return edit_failure("not_a_file" if code == "is_directory" else code, file_path, old_string)

    def edit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Replace ``old_string`` by ``new_string`` in ``file_path`` (once, unless ``replace_all``).

        The file (at most ``max_edit_bytes``) is read, changed in memory and written back to the
        same path through the runtime: no temporary file is staged anywhere, inside or outside the
        workspace, whatever the size of the strings. Messages are deepagents'.
        """
        if not old_string:
            return EditResult(error=EMPTY_OLD_STRING_ERROR)
        try:
            target = _checked_path(file_path)
            if self._skills is not None and self._skills.is_read_only(target):
                return edit_failure("permission_denied", file_path, old_string)
            fs = self._files()
            edited = self._edited(
                file_path,
                fs.read_bytes(target, self._max_edit_bytes),
                old_string,
                new_string,
                replace_all,
            )
            if isinstance(edited, EditResult):
                return edited
            fs.write_bytes(target, edited[0])
        except (SkillRuntimeError, ValueError) as exc:
            return self._edit_error(file_path, old_string, exc)
        return EditResult(path=file_path, occurrences=edited[1])

    async def aedit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Async :meth:`edit`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(
                self.edit, file_path, old_string, new_string, replace_all
            )
        if not old_string:
            return EditResult(error=EMPTY_OLD_STRING_ERROR)
        try:
            target = _checked_path(file_path)
            if self._skills is not None and self._skills.is_read_only(target):
                return edit_failure("permission_denied", file_path, old_string)
            fs = await self._afiles()
            edited = self._edited(
                file_path,
                await fs.read_bytes(target, self._max_edit_bytes),
                old_string,
                new_string,
                replace_all,
            )
            if isinstance(edited, EditResult):
                return edited
            await fs.write_bytes(target, edited[0])
        except (SkillRuntimeError, ValueError) as exc:
            return self._edit_error(file_path, old_string, exc)
        return EditResult(path=file_path, occurrences=edited[1])

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file or a directory tree; a missing path is ``Error: '<path>' not found``."""
        try:
            target = _checked_path(file_path)
            fs = self._files()
            if fs.stat(target) is None:
                return DeleteResult(error=f"Error: '{file_path}' not found")
            fs.delete(target)
        except (SkillRuntimeError, ValueError) as exc:
            return DeleteResult(error=f"Error deleting file '{file_path}': {error_code(exc)}")
        return DeleteResult(path=file_path)

    async def adelete(self, file_path: str) -> DeleteResult:
        """Async :meth:`delete`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.delete, file_path)
        try:
            target = _checked_path(file_path)
            fs = await self._afiles()
            if await fs.stat(target) is None:
                return DeleteResult(error=f"Error: '{file_path}' not found")
            await fs.delete(target)
        except (SkillRuntimeError, ValueError) as exc:
            return DeleteResult(error=f"Error deleting file '{file_path}': {error_code(exc)}")
        return DeleteResult(path=file_path)

    # ------------------------------------------------------------------ glob / grep

    def _search_root(self, path: str | None) -> str:
        return _checked_path(path) if path else self._runtime.default_working_directory

    @staticmethod
    def _walk_step(
        root: str,
        entries: Sequence[FileInfo],
        level_queue: deque[str],
        keep: Callable[[FileInfo], bool],
        found: list[FileInfo],
    ) -> bool:
        """One directory of the walk: queue its subdirectories, keep its files; ``True`` once
        :data:`MAX_SEARCH_FILES` files are held."""
        for entry in sorted(entries, key=lambda item: item.path):
            if entry.is_special:
                continue
            if entry.is_directory:
                if entry.name not in _SEARCH_SKIPPED:
                    level_queue.append(entry.path)
                continue
            if keep(entry):
                found.append(entry)
                if len(found) >= MAX_SEARCH_FILES:
                    return True
        return False

    @classmethod
    def _walk(
        cls, root: str, keep: Callable[[FileInfo], bool]
    ) -> _FileSystemPlan[tuple[list[FileInfo], bool]]:
        """Breadth-first walk below ``root``: the files ``keep`` accepts (at most
        :data:`MAX_SEARCH_FILES`) and whether it stopped early; unlistable directories are
        skipped."""
        info: FileInfo | None = yield ("stat", (root,))
        if info is None:
            raise RuntimeFileNotFoundError(f"Path does not exist: {root}", path=root)
        if not info.is_directory:
            return ([info] if keep(info) else []), False
        found: list[FileInfo] = []
        queue: deque[str] = deque([info.path])
        while queue:
            directory = queue.popleft()
            try:
                entries = yield ("list_directory", (directory, 1, _WALK_LIST_LIMIT))
            except RuntimeFileError as exc:
                logger.debug("search skips %s: %s", directory, type(exc).__name__)
                continue
            if cls._walk_step(info.path, entries, queue, keep, found):
                return found, True
        return found, False

    @staticmethod
    def _glob_filter(pattern: str, root: str) -> Callable[[FileInfo], bool]:
        matcher = _GlobFilter(pattern)
        return lambda entry: matcher.matches(relative_path(entry.path, root))

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Regular files below ``path`` (default: the runtime's working directory) matching
        ``pattern``, as absolute paths — deepagents' contract: no directories, a pattern without
        ``/`` matches names at any depth, a leading ``/`` anchors to the root, dot-names only
        for dot patterns. At most :data:`MAX_SEARCH_FILES` matches (then ``truncated``)."""
        try:
            return _run_plan(self._files(), self._glob_plan(pattern, path))
        except (SkillRuntimeError, ValueError) as exc:
            return GlobResult(error=f"Path '{path or '.'}': {error_code(exc)}")

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Async :meth:`glob`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.glob, pattern, path)
        try:
            return await _arun_plan(await self._afiles(), self._glob_plan(pattern, path))
        except (SkillRuntimeError, ValueError) as exc:
            return GlobResult(error=f"Path '{path or '.'}': {error_code(exc)}")

    def _glob_plan(self, pattern: str, path: str | None) -> _FileSystemPlan[GlobResult]:
        if ".." in pattern.split("/"):
            return GlobResult(error="Error: glob patterns must not contain '..' segments")
        root = self._search_root(path)
        found, truncated = yield from self._walk(root, self._glob_filter(pattern, root))
        return self._glob_result(found, truncated)

    @staticmethod
    def _glob_result(found: list[FileInfo], truncated: bool) -> GlobResult:
        return GlobResult(
            matches=[{"path": info.path, "is_dir": False} for info in found],
            truncated=truncated,
            truncation_reason="budget" if truncated else None,
        )

    def _grep_filter(self, glob: str | None, root: str) -> Callable[[FileInfo], bool]:
        if not glob:
            return lambda entry: True
        return self._glob_filter(glob, root)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Lines containing the literal ``pattern`` in files below ``path`` (filtered by ``glob``),
        read through the runtime's file system. ``max_count`` caps the matches (``truncated`` when
        more exist); files that are not UTF-8 are skipped, files over
        :data:`MAX_SEARCH_FILE_BYTES` or a search past :data:`GREP_TIME_BUDGET_SECONDS` give a
        partial, ``truncated`` result."""
        try:
            return _run_plan(self._files(), self._grep_plan(pattern, path, glob, max_count))
        except (SkillRuntimeError, ValueError) as exc:
            return GrepResult(error=f"Path '{path or '.'}': {error_code(exc)}")

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Async :meth:`grep`."""
        if self._async_runtime is None:
            return await asyncio.to_thread(self.grep, pattern, path, glob, max_count=max_count)
        plan = self._grep_plan(pattern, path, glob, max_count)
        try:
            return await _arun_plan(await self._afiles(), plan)
        except (SkillRuntimeError, ValueError) as exc:
            return GrepResult(error=f"Path '{path or '.'}': {error_code(exc)}")

    def _grep_plan(
        self, pattern: str, path: str | None, glob: str | None, max_count: int | None
    ) -> _FileSystemPlan[GrepResult]:
        deadline = time.monotonic() + GREP_TIME_BUDGET_SECONDS
        cap = max_count + 1 if max_count is not None else None
        root = self._search_root(path)
        files, truncated = yield from self._walk(root, self._grep_filter(glob, root))
        matches: list[GrepMatch] = []
        for entry in files:
            if time.monotonic() > deadline or entry.size > MAX_SEARCH_FILE_BYTES:
                truncated = True
                if time.monotonic() > deadline:
                    break
                continue
            try:
                text = yield ("read_text", (entry.path, MAX_SEARCH_FILE_BYTES))
            except RuntimeFileError as exc:
                logger.debug("grep skips %s: %s", entry.path, type(exc).__name__)
                continue
            if find_literal(entry.path, text, pattern, matches, cap or _NO_CAP):
                break
        return self._grep_result(matches, truncated, max_count)

    @staticmethod
    def _grep_result(
        matches: list[GrepMatch], truncated: bool, max_count: int | None
    ) -> GrepResult:
        if max_count is not None and len(matches) > max_count:
            return GrepResult(matches=matches[:max_count], truncated=True)
        return GrepResult(matches=matches, truncated=truncated)

    def __repr__(self) -> str:
        native = "native async" if self._async_runtime is not None else "threaded async"
        return f"SkillRuntimeBackend(id={self._id!r}, runtime={self._runtime.name!r}, {native})"
