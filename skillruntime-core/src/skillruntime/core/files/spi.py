"""The runtime file system: a few primitives a backend supplies, everything else derived.

Every ``path`` is a runtime path (a POSIX string, handled with :mod:`posixpath`); only the local
side of :meth:`SkillRuntimeFileSystem.download` and :meth:`SkillRuntimeFileSystem.upload` is a host
path. The file system shares the execution boundary of its runtime: same machine or sandbox, same
user, same workspace.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import secrets
import stat as stat_module
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import (
    FileTooLargeError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
)
from ..models import FileInfo
from .search import (
    GlobQuery,
    GrepQuery,
    GrepResult,
    SearchResult,
    default_glob,
    default_grep,
)

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_READ_LIMIT",
    "LIST_CHILDREN_LIMIT",
    "ListChildren",
    "SkillRuntimeFileSystem",
    "StatPath",
    "check_read_limit",
    "decode_file_text",
    "iter_local_file",
    "list_files_plan",
    "open_part_file",
    "read_limit_exceeded",
    "upload_executable",
]

logger = logging.getLogger(__name__)

CHUNK_SIZE = 64 * 1024
"""Chunk size used when streaming file content."""

DEFAULT_READ_LIMIT = 10 * 1024 * 1024
"""Default ``max_bytes`` of :meth:`SkillRuntimeFileSystem.read_bytes` and ``read_text``."""

DEFAULT_LIST_LIMIT = 1000
"""Default ``limit`` of listings."""


def iter_local_file(path: Path, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Yield the content of a host file in chunks (bounded memory)."""
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            yield chunk


def check_read_limit(max_bytes: int) -> None:
    """Refuse a read limit that is not positive."""
    if max_bytes <= 0:
        raise ValueError("max_bytes must be greater than zero")


def read_limit_exceeded(path: str, max_bytes: int) -> FileTooLargeError:
    """The error of a read that went past ``max_bytes``."""
    return FileTooLargeError(
        f"File exceeds read limit of {max_bytes} bytes: {path}", path=path, limit=max_bytes
    )


def decode_file_text(data: bytes, path: str, encoding: str, errors: str) -> str:
    """Decode the content of ``path``; undecodable content raises :class:`RuntimeFileError`."""
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError as exc:
        raise RuntimeFileError(
            f"File is not valid {encoding} text: {path} ({exc.reason} at byte {exc.start})",
            path=path,
        ) from exc


def upload_executable(source: Path, path: str, executable: bool | None) -> bool:
    """Check that the host file ``source`` can be uploaded to ``path``; its executable flag.

    ``executable`` of ``None`` takes the host file's executable bit.
    """
    try:
        mode = source.stat().st_mode
    except FileNotFoundError as exc:
        raise RuntimeFileNotFoundError(f"Local file not found: {source}", path=path) from exc
    if not stat_module.S_ISREG(mode):
        raise RuntimeFileError(f"Local path is not a regular file: {source}", path=path)
    return bool(mode & 0o111) if executable is None else executable


@dataclass(frozen=True)
class StatPath:
    """Step of :func:`list_files_plan`: ask for the :meth:`~SkillRuntimeFileSystem.stat` of
    ``path``."""

    path: str


@dataclass(frozen=True)
class ListChildren:
    """Step of :func:`list_files_plan`: ask for the children of ``directory``."""

    directory: str


def list_files_plan(
    path: str, depth: int, limit: int
) -> Generator[StatPath | ListChildren, Any, list[FileInfo]]:
    """The walk of :meth:`SkillRuntimeFileSystem.list_files`, asking for each stat and listing.

    Breadth-first, each level in listing order, at most ``limit`` regular files; a regular file
    returns itself alone; a missing path raises :class:`RuntimeFileNotFoundError`.
    """
    if limit <= 0:
        return []
    root: FileInfo | None = yield StatPath(path)
    if root is None:
        raise RuntimeFileNotFoundError(f"Path does not exist: {path}", path=path)
    if not root.is_directory:
        return [root]
    found: list[FileInfo] = []
    queue: deque[tuple[str, int]] = deque([(root.path, 1)])
    while queue and len(found) < limit:
        directory, level = queue.popleft()
        entries: list[FileInfo] = yield ListChildren(directory)
        for entry in entries:
            if entry.is_directory:
                if level < depth:
                    queue.append((entry.path, level + 1))
            else:
                found.append(entry)
                if len(found) >= limit:
                    break
    return found


LIST_CHILDREN_LIMIT = DEFAULT_LIST_LIMIT * 100
"""Entries fetched per directory by :meth:`SkillRuntimeFileSystem.list_files`."""


def open_part_file(target: Path) -> tuple[int, Path]:
    """Create the ``<name>.<random>.part`` file next to ``target`` a download writes first.

    Returns the open write descriptor and the path. The file is created with mode ``0o666``
    filtered by the process umask, as ``open()`` or ``cp`` create a file (a ``mkstemp`` file
    would be ``0o600``), so the renamed download gets the permissions of any new file. The
    parent directory must exist (``FileNotFoundError`` otherwise).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        part = target.with_name(f"{target.name}.{secrets.token_hex(4)}.part")
        try:
            return os.open(part, flags, 0o666), part
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a .part file next to {target}")


class SkillRuntimeFileSystem(ABC):
    """File access inside a runtime.

    A backend implements six primitives — :meth:`read_stream`, :meth:`write_stream`, :meth:`stat`,
    :meth:`list_directory`, :meth:`delete`, :meth:`make_directory` — and inherits the rest. It may
    override a derived operation where its service does it faster (for example
    :meth:`upload_files` as one archive upload).
    """

    # ----------------------------------------------------------------- primitives

    @abstractmethod
    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        """Yield the bytes of the regular file ``path`` in chunks.

        Raises :class:`RuntimeFileNotFoundError` when the path is missing or not a regular file
        (at the latest on the first ``next``). Closing the iterator releases the file handle or
        connection; memory use is bounded by ``chunk_size`` whatever the file size.
        """

    @abstractmethod
    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        """Write ``chunks`` to ``path``, replacing any content, and return the bytes written.

        Parent directories are created. ``executable`` sets the executable bits (``0o755``
        instead of ``0o644``). Memory use does not grow with the size of the content.
        """

    @abstractmethod
    def stat(self, path: str) -> FileInfo | None:
        """Return the metadata of ``path``, or ``None`` when it does not exist."""

    @abstractmethod
    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        """List files and directories below ``path`` down to ``depth`` levels (1: children).

        At most ``limit`` entries are returned, sorted by path. A regular file returns itself
        alone. A missing path raises :class:`RuntimeFileNotFoundError`. Symbolic links are
        listed, never followed into.
        """

    @abstractmethod
    def delete(self, path: str) -> None:
        """Delete a file or a directory tree; deleting a missing path succeeds."""

    @abstractmethod
    def make_directory(self, path: str) -> None:
        """Create ``path`` and its parents; an existing directory is fine."""

    # ------------------------------------------------------------------- derived

    def exists(self, path: str) -> bool:
        """True when ``path`` exists."""
        return self.stat(path) is not None

    def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        """Read a whole file, failing with :class:`FileTooLargeError` beyond ``max_bytes``.

        The limit is enforced while streaming: at most ``max_bytes`` plus one chunk is held.
        """
        check_read_limit(max_bytes)
        buffer = bytearray()
        with contextlib.closing(self.read_stream(path)) as stream:
            for chunk in stream:
                buffer.extend(chunk)
                if len(buffer) > max_bytes:
                    raise read_limit_exceeded(path, max_bytes)
        return bytes(buffer)

    def read_text(
        self,
        path: str,
        max_bytes: int = DEFAULT_READ_LIMIT,
        *,
        encoding: str = "utf-8",
        errors: str = "strict",
    ) -> str:
        """Read a text file (UTF-8 by default) with the limit of :meth:`read_bytes`."""
        return decode_file_text(self.read_bytes(path, max_bytes), path, encoding, errors)

    def write_bytes(self, path: str, data: bytes, *, executable: bool = False) -> int:
        """Write ``data`` to ``path`` (parents created, content replaced)."""
        return self.write_stream(path, [bytes(data)], executable=executable)

    def write_text(self, path: str, text: str, *, encoding: str = "utf-8") -> int:
        """Write ``text`` to ``path`` (parents created, content replaced)."""
        return self.write_bytes(path, text.encode(encoding))

    def overwrite_text(self, path: str, text: str, *, encoding: str = "utf-8") -> tuple[int, bool]:
        """:meth:`write_text` that refuses a directory (what :meth:`stat` says is one, links
        followed) with :class:`RuntimeIsADirectoryError` and tells whether ``path`` existed:
        ``(bytes written, existed)``. The default asks :meth:`stat` first; a backend may do both
        in one resolution of the path."""
        info = self.stat(path)
        if info is not None and info.is_directory:
            raise RuntimeIsADirectoryError(f"Cannot write {path}: it is a directory", path=path)
        return self.write_text(path, text, encoding=encoding), info is not None

    def download(self, path: str, destination: str | os.PathLike[str] | BinaryIO) -> Path | None:
        """Copy the runtime file ``path`` to a host file or a writable binary stream.

        For a host path the content goes to a temporary ``<name>.*.part`` file next to it, renamed
        over the destination only when complete: a failure leaves no partial file. Missing parent
        directories are created; a new file gets mode ``0o666`` less the umask, like ``cp``
        (:func:`open_part_file`). The resolved destination is returned. A stream destination is
        written to and left open (``None`` is returned).
        """
        if isinstance(destination, str | os.PathLike):
            return self._download_to_path(path, Path(destination))
        with contextlib.closing(self.read_stream(path)) as stream:
            for chunk in stream:
                destination.write(chunk)
        return None

    def _download_to_path(self, path: str, destination: Path) -> Path:
        target = destination.expanduser().absolute()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, part = open_part_file(target)
        try:
            with (
                os.fdopen(fd, "wb") as handle,
                contextlib.closing(self.read_stream(path)) as stream,
            ):
                for chunk in stream:
                    handle.write(chunk)
            os.replace(part, target)
        except BaseException:
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        return target

    def upload(
        self,
        local_path: str | os.PathLike[str],
        path: str,
        *,
        executable: bool | None = None,
    ) -> int:
        """Copy a host file to the runtime path ``path``, streaming.

        ``executable`` of ``None`` keeps the host file's executable bit.
        """
        source = Path(local_path)
        executable = upload_executable(source, path, executable)
        return self.write_stream(path, iter_local_file(source), executable=executable)

    def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        """Upload many host files: ``(local_path, runtime_path, executable)`` triples.

        Returns the number of files uploaded. The default sends one file at a time; a backend whose
        service takes archives or batches overrides this to use a constant number of requests.
        """
        count = 0
        for local_path, remote_path, executable in files:
            self.upload(local_path, remote_path, executable=executable)
            count += 1
        return count

    def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        """List regular files (no directories) below ``path`` down to ``depth`` levels.

        At most ``limit`` entries, visited breadth-first, each level sorted by path. A regular file
        returns itself alone; a missing path raises :class:`RuntimeFileNotFoundError`.
        """
        plan = list_files_plan(path, depth, limit)
        try:
            step = next(plan)
            while True:
                if isinstance(step, StatPath):
                    step = plan.send(self.stat(step.path))
                else:
                    step = plan.send(self.list_directory(step.directory, 1, LIST_CHILDREN_LIMIT))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """Regular files below ``root`` (its :meth:`stat`) matching ``query`` (see
        :class:`~skillruntime.core.files.search.GlobQuery`), in walk order.

        The default lists one directory at a time; an override must return the same result
        for the same tree (the conformance kit compares it with this default).
        """

        return default_glob(self, root, query)

    def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
    ) -> GrepResult:
        """Search the content of the files below ``root`` (its :meth:`stat`), see
        :class:`~skillruntime.core.files.search.GrepQuery` for the rules and bounds.

        The default walks with :meth:`list_directory` and reads each candidate with
        :meth:`read_text`; an override (one command in a sandbox, say) must return the same
        result for the same tree. ``read_text(path, max_bytes)`` (default :meth:`read_text`) reads
        every file the search reads on the client, so a wrapper can keep its checks on them.
        Raises ``InvalidPatternError`` or :class:`ValueError` for a bad pattern or glob.
        """

        return default_grep(self, root, query, read_text=read_text)

    @staticmethod
    def join(base: str, *parts: str) -> str:
        """Join runtime path components with POSIX rules."""
        return posixpath.join(base, *parts)
