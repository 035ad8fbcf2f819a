"""``DockerFileSystem``: the container's files, each operation one exec of a file script.

Every primitive is one exec (two engine requests) of a script of :mod:`.file_scripts`, run as
the runtime's user, which reaches the path by a pinned walk (race-free against a command of the
conversation that swaps a directory for a symbolic link while the operation runs; see that
module): ``stat``, ``list_directory``, ``delete`` and ``make_directory`` print or change what
they find; ``read_stream`` streams the file's bytes from the exec's output (bounded memory);
``write_stream`` spools the chunks (in memory up to 8 MiB, then in a temporary file) and sends
them as the exec's input. ``glob``/``grep`` read the search root as one tar stream made in the
container by the user (``tar -c``), and walk with the primitives where the image has no ``tar``.

Skills and batches of files (:meth:`DockerFileSystem.place_tree`,
:meth:`DockerFileSystem.upload_files`) go as one archive: in a conversation the engine extracts
it into a fresh staging directory that only root can enter, in a sticky directory below the
volume's mount point (a path no command of the container can change, checked once per
container, where no command can rename a directory of root's), a second ``PUT`` hands the
directory to the user, and one exec as the user moves it into the workspace by the
same pinned walk (:data:`.file_scripts.PLACE_SCRIPT`);
without a conversation, the archive is extracted by ``tar -x`` run as the user.

In a conversation the workspace is the boundary: a symbolic link on the way to a path (a parent
component, or the path itself for a read or stat) is followed only while the directory or file
it reaches is inside the workspace (checked physically, where the kernel put the walk); one that
leaves it raises :class:`~skillruntime.core.errors.WorkspaceEscapeError`. A write replaces a link
at the path itself (it never writes through it). The user's permissions are the kernel's.
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import secrets
import stat as stat_module
import tarfile
import tempfile
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from skillruntime.core.errors import (
    InvalidPathError,
    NotADirectoryFileError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    WorkspaceEscapeError,
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
from skillruntime.core.files.search_command import Listing, glob_from_listing, grep_from_output
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, SkillRuntimeFileSystem
from skillruntime.core.models import FileInfo

from . import file_scripts as scripts
from .archive import ArchiveMemberError, DirectoryEntry, FileEntry, tar_stream
from .engine import DockerEngine
from .errors import DockerEngineError
from .file_scripts import Status
from .script_exec import ScriptExec, ScriptOutcome, ScriptStream

__all__ = ["ContainerTarget", "DockerFileSystem", "shell_argument"]

logger = logging.getLogger(__name__)

_SPOOL_BYTES = 8 * 1024 * 1024
_SEARCH_CAP = 64 * 1024 * 1024
_TREE_BYTES = 256 * 1024 * 1024
_EXECUTABLE_BITS = 0o100
_SCRIPT_SECONDS = 120.0
_SECONDS_PER_MIB = 1.0
_STAGES = ".skillruntime-stages"
"""The staging directories' parent below the mount point: root's, sticky, writable by all."""
_GROUP_FILES = 4
"""Files of one batch going into one directory from which they travel as a group (one ``mv``
for all of them, see :data:`.file_scripts.PLACE_SCRIPT`) instead of one ``mv`` each."""
_CHECKED_STAGES: set[tuple[str, str, str]] = set()
"""(engine address, container, mount point) whose staging path was checked (once a process)."""
_CHECKED_LOCK = threading.Lock()


@dataclass(frozen=True)
class ContainerTarget:
    """The container file operations go to, and the user they run as (``uid``/``gid`` own the
    files written through the archive API)."""

    container_id: str
    uid: int
    gid: int

    @property
    def user(self) -> str:
        """The exec user, ``uid:gid``."""
        return f"{self.uid}:{self.gid}"


def shell_argument(path: str) -> str:
    """``path`` as a ``printf %b`` argument: its bytes with every backslash and every byte
    outside printable ASCII as ``\\0ooo``, so a name that is not UTF-8 survives the JSON of the
    exec request (the scripts decode it with ``printf '%b'``)."""
    out = []
    for byte in path.encode("utf-8", "surrogateescape"):
        if byte == 0x5C or byte < 0x20 or byte >= 0x7F:
            out.append(f"\\0{byte:03o}")
        else:
            out.append(chr(byte))
    return "".join(out)


def _classify(text: str, path: str, operation: str) -> RuntimeFileError:
    """The typed error of a file script's failure from the system's (C locale) error text."""
    lowered = text.lower()
    reason = text.strip().splitlines()[-1] if text.strip() else "failed"
    message = f"Cannot {operation} {printable(path)}: {printable(reason)}"
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return RuntimePermissionError(message, path=path)
    if "read-only file system" in lowered:
        return RuntimePermissionError(message, path=path)
    if "not a directory" in lowered or "file exists" in lowered:
        return NotADirectoryFileError(message, path=path)
    if "is a directory" in lowered:
        return RuntimeIsADirectoryError(message, path=path)
    if "no such file" in lowered:
        return RuntimeFileNotFoundError(message, path=path)
    if "too long" in lowered or "too many levels" in lowered or "symbolic link loop" in lowered:
        return InvalidPathError(message, path=path)
    return RuntimeFileError(message, path=path)


def _failure(
    outcome: ScriptOutcome, path: str, operation: str
) -> RuntimeFileError | WorkspaceEscapeError:
    """The typed error of a file script that did not succeed (see :class:`Status`)."""
    status = outcome.status
    if outcome.timed_out:
        return RuntimeFileError(f"Cannot {operation} {printable(path)}: timed out", path=path)
    if status == Status.MISSING:
        return RuntimeFileNotFoundError(f"No such file or directory: {printable(path)}", path=path)
    if status == Status.NOT_DIRECTORY:
        return NotADirectoryFileError(
            f"Cannot {operation} {printable(path)}: not a directory", path=path
        )
    if status == Status.DENIED:
        return RuntimePermissionError(
            f"Cannot {operation} {printable(path)}: permission denied", path=path
        )
    if status == Status.ESCAPE:
        return WorkspaceEscapeError(
            f"Cannot {operation} {printable(path)}: a symbolic link leads out of the workspace"
        )
    if status == Status.IS_DIRECTORY:
        return RuntimeIsADirectoryError(f"Is a directory: {printable(path)}", path=path)
    if status == Status.NOT_REGULAR:
        return NotRegularFileError(f"Not a regular file: {printable(path)}", path=path)
    if status == Status.LINK_LOOP:
        return InvalidPathError(
            f"Cannot {operation} {printable(path)}: too many levels of symbolic links", path=path
        )
    if status == Status.CHANGED:
        return RuntimeFileError(
            f"Cannot {operation} {printable(path)}: it changed while it was worked on; try again",
            path=path,
        )
    if status == Status.UNSAFE_ROOT:
        return RuntimePermissionError(
            f"Cannot {operation} {printable(path)}: the container's user can change a directory "
            f"above the workspace volume ({outcome.message or 'see the container'}), so no archive "
            "is staged there",
            path=path,
        )
    if status == Status.NO_TOOL:
        return RuntimeFileError(
            f"Cannot {operation} {printable(path)}: the image lacks a tool the operation needs",
            path=path,
        )
    if status == Status.TOOL_ERROR or outcome.message:
        return _classify(outcome.stderr.decode("utf-8", "replace"), path, operation)
    return RuntimeFileError(
        f"Cannot {operation} {printable(path)}: exit status {status}", path=path
    )


def _engine_error(exc: DockerEngineError, path: str, operation: str) -> RuntimeFileError:
    text = str(exc)
    if exc.status_code == 404:
        return RuntimeFileNotFoundError(
            f"Cannot {operation} {printable(path)}: not found", path=path
        )
    if exc.status_code == 403:
        return RuntimePermissionError(
            f"Cannot {operation} {printable(path)}: {printable(text)}", path=path
        )
    return _classify(text, path, operation)


def _file_info(path: str, line: str) -> FileInfo:
    mode_hex, size, mtime = line.split()
    mode = int(mode_hex, 16)
    is_dir = stat_module.S_ISDIR(mode)
    is_reg = stat_module.S_ISREG(mode)
    return FileInfo(
        path=path,
        is_directory=is_dir,
        size=int(size) if is_reg else 0,
        modified_time=float(mtime),
        is_executable=is_reg and bool(mode & _EXECUTABLE_BITS),
        is_special=not (is_dir or is_reg or stat_module.S_ISLNK(mode)),
    )


def _spooled(chunks: Iterable[bytes]) -> tuple[IO[bytes], int]:
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned open
    size = 0
    try:
        for chunk in chunks:
            spool.write(chunk)
            size += len(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return cast("IO[bytes]", spool), size


def _read_chunks(source: IO[bytes], size: int = CHUNK_SIZE) -> Iterator[bytes]:
    while chunk := source.read(size):
        yield chunk


class DockerFileSystem(SkillRuntimeFileSystem):
    """The file system of the runtime's container; see the module docs.

    ``target`` returns the container to use (attaching it on first use); ``boundary`` is the
    workspace directory in a conversation (``None``: no boundary) and ``stage_root`` the
    volume's mount point above it (where archives are staged).
    """

    def __init__(
        self,
        engine: DockerEngine,
        target: Callable[[], ContainerTarget],
        *,
        boundary: str | None,
        stage_root: str | None = None,
    ) -> None:
        self._engine = engine
        self._scripts = ScriptExec(engine)
        self._target = target
        self._boundary = boundary
        self._stage_root = stage_root

    # ------------------------------------------------------------- helpers

    def _argv(self, script: str, path: str, *extra: str) -> list[str]:
        return [
            "/bin/sh",
            "-c",
            script,
            "skillruntime-files",
            shell_argument(self._boundary or ""),
            shell_argument(path),
            *extra,
        ]

    def _checked_path(self, path: str, operation: str) -> str:
        """``path`` normalised; in a conversation it must be lexically inside the workspace."""
        normal = posixpath.normpath(path) if path else path
        if not normal.startswith("/"):
            raise InvalidPathError(
                f"Cannot {operation} {printable(path)}: not an absolute path", path=path
            )
        boundary = self._boundary
        if boundary is not None and not (
            normal == boundary or normal.startswith(boundary.rstrip("/") + "/")
        ):
            raise WorkspaceEscapeError(
                f"Cannot {operation} {printable(path)}: outside the workspace"
            )
        return normal

    def _run(
        self,
        script: str,
        path: str,
        operation: str,
        *extra: str,
        stdin: Iterable[bytes] | None = None,
        timeout: float = _SCRIPT_SECONDS,
        cap: int = _SEARCH_CAP,
        accept: frozenset[int] = frozenset({Status.OK}),
        target: ContainerTarget | None = None,
    ) -> ScriptOutcome:
        """Run a file script for ``path`` as the runtime's user (in ``target``, else the
        runtime's container); a status outside ``accept`` raises its typed error."""
        target = target or self._target()
        normal = self._checked_path(path, operation)
        try:
            outcome = self._scripts.run(
                target.container_id,
                self._argv(script, normal, *extra),
                user=target.user,
                timeout_seconds=timeout,
                cap=cap,
                stdin=stdin,
            )
        except DockerEngineError as exc:
            raise _engine_error(exc, path, operation) from exc
        if outcome.status not in accept:
            raise _failure(outcome, path, operation)
        return outcome

    # ---------------------------------------------------------- primitives

    def stat(self, path: str) -> FileInfo | None:
        outcome = self._run(
            scripts.STAT_SCRIPT,
            path,
            "stat",
            accept=frozenset({Status.OK, Status.MISSING, Status.NOT_DIRECTORY}),
        )
        if outcome.status != Status.OK:
            return None
        line = outcome.stdout.decode("ascii", "replace").strip()
        try:
            return _file_info(path, line)
        except ValueError as exc:
            raise RuntimeFileError(
                f"Cannot stat {printable(path)}: unreadable answer", path=path
            ) from exc

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        """The file's bytes; the file is opened and checked before this returns (its errors
        raise here), its bytes stream as the generator is consumed."""
        target = self._target()
        normal = self._checked_path(path, "read")
        try:
            started = self._scripts.open(
                target.container_id,
                self._argv(scripts.READ_SCRIPT, normal),
                user=target.user,
                timeout_seconds=_SCRIPT_SECONDS,
            )
        except DockerEngineError as exc:
            raise _engine_error(exc, path, "read") from exc
        chunks = started.chunks()
        head = b""
        try:
            for chunk in chunks:
                head += chunk
                if len(head) >= len(scripts.DATA_MARK):
                    break
        except BaseException:
            started.close()
            raise
        if not head.startswith(scripts.DATA_MARK):
            outcome = started.finish()
            raise _failure(outcome, path, "read")
        return self._rest(started, chunks, head[len(scripts.DATA_MARK) :], path, chunk_size)

    def _rest(
        self,
        started: ScriptStream,
        chunks: Iterator[bytes],
        first: bytes,
        path: str,
        chunk_size: int,
    ) -> Generator[bytes, None, None]:
        finished = False
        try:
            pending = first
            for chunk in chunks:
                pending += chunk
                while len(pending) >= chunk_size:
                    yield pending[:chunk_size]
                    pending = pending[chunk_size:]
            if pending:
                yield pending
            finished = True
        finally:
            if not finished:
                started.close()
        outcome = started.finish()
        if outcome.status != Status.OK:
            raise _failure(outcome, path, "read")

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        spool, size = _spooled(chunks)
        with spool:
            self._run(
                scripts.WRITE_SCRIPT,
                path,
                "write",
                secrets.token_hex(8),
                "x" if executable else "-",
                str(size),
                stdin=_read_chunks(spool),
                timeout=_SCRIPT_SECONDS + _SECONDS_PER_MIB * size / 2**20,
            )
        return size

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        outcome = self._run(scripts.LIST_SCRIPT, path, "list", str(depth))
        if outcome.stdout_truncated:
            raise RuntimeFileError(
                f"Cannot list {printable(path)}: the listing is too large", path=path
            )
        data = outcome.stdout
        kind, data = data[:1], data[1:]
        if kind == b"f":
            _, _, stats_part = data.partition(b"\0\0")
            line = stats_part.decode("ascii", "replace").strip()
            return [_file_info(path, line)]
        if kind != b"d":
            raise RuntimeFileError(f"Cannot list {printable(path)}: unreadable answer", path=path)
        if data.startswith(b"\0"):
            names_part, stats_part = b"", data[1:]
        else:
            names_part, _, stats_part = data.partition(b"\0\0")
        names = names_part.split(b"\0") if names_part else []
        stats = stats_part.decode("ascii", "replace").splitlines()
        if len(stats) != len(names):
            raise RuntimeFileError(
                f"Cannot list {printable(path)}: entries changed while it was listed; try again",
                path=path,
            )
        base = path.rstrip("/") or ""
        entries = []
        for raw_name, line in zip(names, stats, strict=True):
            name = raw_name.decode("utf-8", "surrogateescape").removeprefix("./")
            entries.append(_file_info(f"{base}/{name}", line))
        entries.sort(key=lambda item: item.path)
        return entries[:limit]

    def delete(self, path: str) -> None:
        self._run(
            scripts.DELETE_SCRIPT,
            path,
            "delete",
            accept=frozenset({Status.OK, Status.MISSING, Status.NOT_DIRECTORY}),
        )

    def make_directory(self, path: str, *, target: ContainerTarget | None = None) -> None:
        """Make ``path`` and its missing parents (in ``target``, else the runtime's
        container)."""
        outcome = self._run(
            scripts.MKDIR_SCRIPT,
            path,
            "create directory",
            accept=frozenset({Status.OK, Status.MISSING}),
            target=target,
        )
        if outcome.status == Status.MISSING:
            raise NotADirectoryFileError(
                f"Cannot create directory {printable(path)}: a dangling symbolic link is in the "
                "way",
                path=path,
            )

    # ------------------------------------------------------ derived, faster

    def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        """Every file in one archive (see the module docs), below their deepest common
        directory, which is created when missing."""
        items = [(Path(local), remote, executable) for local, remote, executable in files]
        if not items:
            return 0
        common = posixpath.commonpath([posixpath.dirname(remote) for _, remote, _ in items])
        target = self._target()
        normal = self._checked_path(common, "upload into")
        if self._boundary is None or self._stage_root is None:
            relative = [
                (local, posixpath.relpath(remote, common), executable)
                for local, remote, executable in items
            ]
            self._untar(target, normal, relative, [], remove="")
        else:
            groups: dict[str, list[tuple[Path, str, bool]]] = {}
            for local, remote, executable in items:
                path = posixpath.normpath(remote)
                groups.setdefault(posixpath.dirname(path), []).append((local, path, executable))
            staged: list[tuple[str, Path | None, str, bool]] = []
            for directory, group in groups.items():
                if len(group) < _GROUP_FILES or directory == self._boundary.rstrip("/"):
                    staged += [("F", local, remote, ex) for local, remote, ex in group]
                else:
                    staged.append(("G", None, directory, False))
                    staged += [("g", local, remote, ex) for local, remote, ex in group]
            self._stage_and_place(target, normal, staged, [])
        return len(items)

    def place_tree(
        self,
        directory: str,
        files: list[tuple[Path, str, bool]],
        *,
        marker: tuple[str, bytes] | None = None,
    ) -> None:
        """``directory`` replaced by a tree of ``files`` (local path, path relative to
        ``directory``, executable) with one archive; the directories above it are made when
        missing. Whatever was at ``directory`` (an earlier incomplete copy, a link) is removed,
        never followed. ``marker`` (a path next to ``directory``, its bytes) is written once
        the tree is in place, in the same operation."""
        target = self._target()
        normal = self._checked_path(directory, "upload into")
        parent, name = posixpath.split(normal)
        if marker is not None and posixpath.dirname(marker[0]) != parent:
            raise ValueError("the marker must lie next to the directory")
        if self._boundary is None or self._stage_root is None:
            extra = [(posixpath.basename(marker[0]), marker[1])] if marker else []
            tree = [
                (local, posixpath.join(name, rel), executable) for local, rel, executable in files
            ]
            self._untar(target, parent, tree, extra, remove=name)
            return
        self._stage_and_place(
            target,
            normal,
            [("T", None, normal, False)] + [("t", local, rel, ex) for local, rel, ex in files],
            [(marker[0], marker[1])] if marker else [],
        )

    def _entries(
        self, files: list[tuple[Path, str, bool]], prefix: str, handles: list[IO[bytes]]
    ) -> list[DirectoryEntry | FileEntry]:
        entries: list[DirectoryEntry | FileEntry] = []
        seen: set[str] = set()
        for local, relative, executable in files:
            parent = posixpath.dirname(relative)
            chain = []
            while parent and parent not in seen:
                seen.add(parent)
                chain.append(parent)
                parent = posixpath.dirname(parent)
            entries.extend(DirectoryEntry(posixpath.join(prefix, name)) for name in reversed(chain))
            try:
                handle: IO[bytes] = local.open("rb")
            except OSError as exc:
                raise RuntimeFileError(
                    f"Cannot upload {local}: {exc.strerror}", path=relative
                ) from exc
            handles.append(handle)
            size = os.fstat(handle.fileno()).st_size
            entries.append(
                FileEntry(
                    posixpath.join(prefix, relative), size, handle, 0o755 if executable else 0o644
                )
            )
        return entries

    def _untar(
        self,
        target: ContainerTarget,
        directory: str,
        files: list[tuple[Path, str, bool]],
        extra: list[tuple[str, bytes]],
        *,
        remove: str,
    ) -> None:
        """``files`` (relative to ``directory``) and then the in-memory files ``extra``
        extracted by ``tar`` run as the user; ``remove`` (an entry of ``directory``) first."""
        handles: list[IO[bytes]] = []
        try:
            entries = self._entries(files, "", handles)
            entries += [FileEntry(name, len(data), io.BytesIO(data)) for name, data in extra]
            spool, size = _spooled(tar_stream(entries, uid=target.uid, gid=target.gid))
        finally:
            for handle in handles:
                handle.close()
        with spool:
            self._run(
                scripts.UNTAR_SCRIPT,
                directory,
                "upload into",
                shell_argument(remove),
                str(size),
                stdin=_read_chunks(spool),
                timeout=_SCRIPT_SECONDS + _SECONDS_PER_MIB * size / 2**20,
            )

    def _stage_and_place(
        self,
        target: ContainerTarget,
        directory: str,
        items: list[tuple[str, Path | None, str, bool]],
        extra: list[tuple[str, bytes]],
    ) -> None:
        """One archive into a fresh staging directory, handed to the user, then moved into
        place (see the module docs). ``items``: ``("T", None, path, _)`` a tree replacing
        ``path``, followed by its files ``("t", local, relative, executable)``;
        ``("G", None, directory, _)`` a group of files going into ``directory``, followed by
        them, ``("g", local, path, executable)`` (``path`` in ``directory``); or
        ``("F", local, path, executable)`` a file at ``path``. ``extra``: in-memory files
        (path, bytes) placed last."""
        stage_root = self._stage_root
        boundary = self._boundary
        assert stage_root is not None
        assert boundary is not None
        self._check_stage_root(target, stage_root, directory)
        stage = f"{_STAGES}/{secrets.token_hex(12)}"
        handles: list[IO[bytes]] = []
        triples: list[str] = []
        size = 0
        try:
            entries: list[DirectoryEntry | FileEntry] = [
                DirectoryEntry(_STAGES, mode=0o1777, owner=(0, 0)),
                DirectoryEntry(stage, mode=0o700, owner=(0, 0)),
            ]
            tree: list[tuple[Path, str, bool]] = []
            group = ""
            for index, (kind, local, path, executable) in enumerate(items):
                if kind == "T":
                    entries.append(DirectoryEntry(f"{stage}/tree"))
                    triples += ["T", "tree", shell_argument(path)]
                elif kind == "G":
                    group = f"g{index}"
                    entries.append(DirectoryEntry(f"{stage}/{group}"))
                    triples += ["G", group, shell_argument(path)]
                elif kind == "g":
                    assert local is not None
                    name = posixpath.basename(path)
                    entries.extend(
                        self._entries([(local, f"{group}/{name}", executable)], stage, handles)
                    )
                elif kind == "t":
                    assert local is not None
                    tree.append((local, path, executable))
                else:
                    assert local is not None
                    entries.extend(
                        self._entries([(local, f"f{index}", executable)], stage, handles)
                    )
                    triples += ["F", f"f{index}", shell_argument(path)]
            entries.extend(self._entries(tree, f"{stage}/tree", handles))
            for index, (path, data) in enumerate(extra):
                entries.append(FileEntry(f"{stage}/x{index}", len(data), io.BytesIO(data)))
                triples += ["F", f"x{index}", shell_argument(path)]
            size = sum(entry.size for entry in entries if isinstance(entry, FileEntry))
            try:
                self._engine.put_archive(
                    target.container_id,
                    stage_root,
                    tar_stream(entries, uid=target.uid, gid=target.gid),
                )
                # Extracted: the staging directory becomes the user's (its path is root's).
                self._engine.put_archive(
                    target.container_id,
                    stage_root,
                    tar_stream([DirectoryEntry(stage, mode=0o700)], uid=target.uid, gid=target.gid),
                )
            except DockerEngineError as exc:
                raise _engine_error(exc, directory, "upload into") from exc
        finally:
            for handle in handles:
                handle.close()
        argv = [
            "/bin/sh",
            "-c",
            scripts.PLACE_SCRIPT,
            "skillruntime-files",
            shell_argument(boundary),
            shell_argument(boundary),
            shell_argument(posixpath.join(stage_root, stage)),
            *triples,
        ]
        try:
            outcome = self._scripts.run(
                target.container_id,
                argv,
                user=target.user,
                timeout_seconds=_SCRIPT_SECONDS + _SECONDS_PER_MIB * size / 2**20,
            )
        except DockerEngineError as exc:
            raise _engine_error(exc, directory, "upload into") from exc
        if outcome.status != Status.OK:
            raise _failure(outcome, directory, "upload into")

    def _check_stage_root(self, target: ContainerTarget, stage_root: str, path: str) -> None:
        """Once per container and process: the mount point and every directory above it are
        root's and not writable by others (see
        :data:`.file_scripts.STAGE_CHECK_SCRIPT`)."""
        key = (self._engine.address, target.container_id, stage_root)
        with _CHECKED_LOCK:
            if key in _CHECKED_STAGES:
                return
        argv = [
            "/bin/sh",
            "-c",
            scripts.STAGE_CHECK_SCRIPT,
            "skillruntime-files",
            shell_argument(stage_root),
        ]
        try:
            outcome = self._scripts.run(target.container_id, argv, user=target.user, cap=4096)
        except DockerEngineError as exc:
            raise _engine_error(exc, path, "upload into") from exc
        if outcome.status != Status.OK:
            raise _failure(outcome, path, "upload into")
        with _CHECKED_LOCK:
            _CHECKED_STAGES.add(key)

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One archive of the tree (one exec) replayed as the default walk; the default walk
        on the primitives when it cannot be had (see :meth:`_tree`)."""
        if not root.is_directory or root.is_special:
            return super().glob(root, query)
        GlobMatcher(query.pattern)
        found = self._tree(root, content_limit=None)
        if found is None:
            return super().glob(root, query)
        return glob_from_listing(found[0], root, query)

    def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
    ) -> GrepResult:
        """One archive of the tree and its files (one exec), searched as the default does;
        links are read with ``read_text``."""
        if not root.is_directory or root.is_special:
            return super().grep(root, query, read_text=read_text)
        GrepEngine(query, root.path)
        found = self._tree(root, content_limit=query.max_file_bytes)
        if found is None:
            return super().grep(root, query, read_text=read_text)
        listing, contents = found
        return grep_from_output(listing, contents, root, query, read_text or self.read_text)

    def _tree(
        self, root: FileInfo, *, content_limit: int | None
    ) -> tuple[Listing, dict[str, bytes]] | None:
        """The listing below ``root`` and (``content_limit`` set) the regular files no larger
        than it, from one ``tar`` stream of the directory made in the container by the user
        (:data:`.file_scripts.TREE_SCRIPT`); ``None`` when the image has no ``tar``, ``tar``
        failed, the stream passes :data:`_TREE_BYTES` or holds more than :data:`_SEARCH_CAP` of
        kept files (walk then). A member whose name leaves the directory is refused."""
        target = self._target()
        normal = self._checked_path(root.path, "search")
        try:
            started = self._scripts.open(
                target.container_id,
                self._argv(scripts.TREE_SCRIPT, normal),
                user=target.user,
                timeout_seconds=_SCRIPT_SECONDS,
            )
        except DockerEngineError as exc:
            raise _engine_error(exc, root.path, "search") from exc
        reader = _CountingChunks(started.chunks(), _TREE_BYTES)
        records: list[bytes] = []
        contents: dict[str, bytes] = {}
        kept = 0
        parent = root.path.rstrip("/")
        try:
            with tarfile.open(fileobj=cast("IO[bytes]", reader), mode="r|") as archive:
                for member in archive:
                    name = member.name.rstrip("/")
                    if name in {".", ""}:
                        continue
                    if not name.startswith("./"):
                        raise ArchiveMemberError(f"archive member refused: {name!r}")
                    name = name[2:]
                    if name.startswith("/") or ".." in name.split("/"):
                        raise ArchiveMemberError(f"archive member refused: {name!r}")
                    path = parent + "/" + name
                    kind = (
                        "d"
                        if member.isdir()
                        else "f"
                        if member.isreg()
                        else "l"
                        if member.issym()
                        else "s"
                    )
                    size = member.size if member.isreg() else 0
                    record = f"{kind}\t{size}\t{int(member.mtime)}\t{member.mode:o}\t{path}"
                    records.append(record.encode("utf-8", "surrogateescape"))
                    if content_limit is not None and member.isreg() and size <= content_limit:
                        handle = archive.extractfile(member)
                        data = handle.read() if handle is not None else b""
                        kept += len(data)
                        if kept > _SEARCH_CAP:
                            started.close()
                            return None
                        contents[path] = data
        except (tarfile.TarError, ArchiveMemberError, _TooLargeError) as exc:
            logger.debug("archive of %s unusable (%s); walking instead", root.path, exc)
            started.close()
            started.finish()
            return None
        outcome = started.finish()
        if outcome.status in {Status.MISSING, Status.NOT_DIRECTORY, Status.DENIED, Status.ESCAPE}:
            raise _failure(outcome, root.path, "search")
        if outcome.status != Status.OK:
            logger.debug("tar of %s ended with %s; walking instead", root.path, outcome.status)
            return None
        listing = Listing(b"\0".join(records), executable_bits=_EXECUTABLE_BITS)
        return listing, contents


class _TooLargeError(Exception):
    """The archive passed its byte limit."""


class _CountingChunks:
    """A reader over chunks that fails past ``limit`` bytes (what ``tarfile`` reads from)."""

    def __init__(self, chunks: Iterator[bytes], limit: int) -> None:
        self._chunks = chunks
        self._limit = limit
        self._seen = 0
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._seen += len(chunk)
            if self._seen > self._limit:
                raise _TooLargeError
            self._buffer += chunk
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data
