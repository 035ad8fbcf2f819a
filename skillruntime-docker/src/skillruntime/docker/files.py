"""``DockerFileSystem``: the container's files through the archive API and a few file scripts.

* ``read_stream`` is one ``GET /containers/{id}/archive`` (the path's tar stream, read member by
  member in bounded memory; every member is checked, see :mod:`.archive`); ``stat`` is one
  ``HEAD`` of the same endpoint.
* ``write_stream`` spools the chunks (in memory up to 8 MiB, then in a temporary file), then
  sends one ``PUT /containers/{id}/archive`` with the file owned by the runtime's user;
  :meth:`upload_files` sends every file of a batch as **one** tar stream.
* ``list_directory``, ``delete`` and ``make_directory`` are one exec each of a small shell script
  run as the runtime's user (so its permissions apply), with ``LC_ALL=C``; failures are mapped to
  the core's typed file errors from the script's exit status or the system's error text.
* ``glob``/``grep`` run the core's one-command search
  (:mod:`skillruntime.core.files.search_command`) and walk with the primitives where the image
  lacks its tools (GNU ``find``/``tar``: a busybox image walks).

In a conversation, the workspace is a path boundary: a symbolic link on the way to a path (a
parent component, or the path itself for a read) is followed only while it stays inside the
workspace, lexically resolved; one that leaves it raises
:class:`~skillruntime.core.errors.WorkspaceEscapeError`. Archive writes are done by the engine
(as root, owned by the runtime's user afterwards); the user's permission to write into the
parent directory is checked from the stat the write makes anyway, and a write the user could
not make raises :class:`~skillruntime.core.errors.RuntimePermissionError` (see
:meth:`DockerFileSystem._check_writable`).
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import stat as stat_module
import tarfile
import tempfile
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NoReturn, cast

from skillruntime.core.errors import (
    InvalidPathError,
    NotADirectoryFileError,
    NotRegularFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    WorkspaceEscapeError,
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
from skillruntime.core.models import FileInfo, SkillExecutionResult

from .archive import ArchiveMemberError, DirectoryEntry, FileEntry, MemberReader, tar_stream
from .commands import RawOutcome
from .engine import DockerEngine, PathStat
from .errors import DockerEngineError

__all__ = ["ContainerTarget", "DockerFileSystem"]

logger = logging.getLogger(__name__)

_SPOOL_BYTES = 8 * 1024 * 1024
_LINK_HOPS = 8
_SEARCH_CAP = 64 * 1024 * 1024
_TREE_BYTES = 256 * 1024 * 1024
_EXECUTABLE_BITS = 0o100
_MISSING = 2
_NOT_DIRECTORY = 3
_DENIED = 5
_ESCAPE = 6

_PRELUDE = (
    "export LC_ALL=C\n"
    "B=$(printf '%b.' \"$1\"); B=${B%.}; p=$(printf '%b.' \"$2\"); p=${p%.}\n"
    "inside() {\n"
    '  [ -n "$B" ] || return 0\n'
    '  d="$1"\n'
    '  while [ ! -e "$d" ] && [ ! -L "$d" ] && [ "$d" != / ]; do d=$(dirname -- "$d"); done\n'
    '  r=$(realpath -- "$d" 2>/dev/null) || return 0\n'
    '  case "$r/" in "$B"/*) return 0;; esac\n'
    "  return 1\n"
    "}\n"
    "missing() {\n"
    '  a=$(dirname -- "$p")\n'
    '  while [ "$a" != / ] && [ ! -e "$a" ]; do a=$(dirname -- "$a"); done\n'
    '  if [ -e "$a" ] && [ ! -d "$a" ]; then exit 3; fi\n'
    "  exit 2\n"
    "}\n"
    'inside "$(dirname -- "$p")" || exit 6\n'
)

_LIST_SCRIPT = _PRELUDE + (
    'depth="$3"\n'
    'if [ ! -e "$p" ] && [ ! -L "$p" ]; then missing; fi\n'
    "t=$(mktemp) || exit 4\n"
    "trap 'rm -f \"$t\"' EXIT\n"
    'if [ -d "$p" ] && [ ! -L "$p" ]; then\n'
    '  { [ -r "$p" ] && [ -x "$p" ]; } || exit 5\n'
    '  find "$p" -mindepth 1 -maxdepth "$depth" -print0 > "$t" 2>/dev/null\n'
    "else\n"
    '  printf \'%s\\0\' "$p" > "$t"\n'
    "fi\n"
    'cat "$t"\n'
    "printf '\\0'\n"
    "xargs -0 -r stat -c '%f %s %Y' -- < \"$t\" 2>/dev/null\n"
    "exit 0\n"
)

_CAT_SCRIPT = _PRELUDE + (
    'if [ ! -e "$p" ]; then missing; fi\n'
    'if [ -d "$p" ]; then exit 7; fi\n'
    'if [ ! -f "$p" ]; then exit 8; fi\n'
    'exec cat -- "$p"\n'
)

_DELETE_SCRIPT = _PRELUDE + ('if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 0; fi\nrm -rf -- "$p"\n')

_MKDIR_SCRIPT = _PRELUDE + (
    'if [ -d "$p" ]; then exit 0; fi\n'
    'if [ -e "$p" ] || [ -L "$p" ]; then exit 3; fi\n'
    'mkdir -p -- "$p"\n'
)


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


ScriptRunner = Callable[[ContainerTarget, list[str], float, int], RawOutcome]
CommandRunnerHook = Callable[[str, float, int], SkillExecutionResult]


def _classify(text: str, path: str, operation: str) -> RuntimeFileError:
    """The typed error of a file script's failure from the system's (C locale) error text."""
    lowered = text.lower()
    reason = text.strip().splitlines()[-1] if text.strip() else "failed"
    message = f"Cannot {operation} {path}: {reason}"
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
    if "too long" in lowered or "too many levels" in lowered:
        return InvalidPathError(message, path=path)
    return RuntimeFileError(message, path=path)


def _engine_error(exc: DockerEngineError, path: str, operation: str) -> RuntimeFileError:
    text = str(exc)
    if exc.status_code == 404:
        return RuntimeFileNotFoundError(f"Cannot {operation} {path}: not found", path=path)
    if exc.status_code == 403:
        return RuntimePermissionError(f"Cannot {operation} {path}: {text}", path=path)
    return _classify(text, path, operation)


class DockerFileSystem(SkillRuntimeFileSystem):
    """The file system of the runtime's container; see the module docs.

    ``target`` returns the container to use (attaching it on first use); ``boundary`` is the
    workspace directory in a conversation (``None``: no boundary); ``run_script`` runs a file
    script; ``run_command`` runs a search command through the command wrapper; ``owned_roots``
    are the trees of the runtime's user (see :meth:`_check_writable`).
    """

    def __init__(
        self,
        engine: DockerEngine,
        target: Callable[[], ContainerTarget],
        *,
        boundary: str | None,
        run_script: ScriptRunner,
        run_command: CommandRunnerHook,
        owned_roots: tuple[str, ...] = (),
    ) -> None:
        self._engine = engine
        self._owned_roots = owned_roots
        self._target = target
        self._boundary = boundary
        self._run_script = run_script
        self._run_command = run_command

    # ------------------------------------------------------------- helpers

    def _inside(self, path: str) -> bool:
        boundary = self._boundary
        return boundary is None or path == boundary or path.startswith(boundary.rstrip("/") + "/")

    def _stat_raw(self, target: ContainerTarget, path: str, operation: str) -> PathStat | None:
        try:
            return self._engine.stat_path(target.container_id, path)
        except DockerEngineError as exc:
            if exc.status_code in {400, 500}:
                # The engine refuses a path below a regular file.
                self._parent_is_file(target, path, operation, exc)
            raise _engine_error(exc, path, operation) from exc

    def _parent_is_file(
        self, target: ContainerTarget, path: str, operation: str, exc: DockerEngineError
    ) -> NoReturn:
        parent = posixpath.dirname(path)
        while parent not in {"", "/"}:
            try:
                found = self._engine.stat_path(target.container_id, parent)
            except DockerEngineError:
                parent = posixpath.dirname(parent)
                continue
            if found is not None and not found.is_directory:
                raise NotADirectoryFileError(
                    f"Cannot {operation} {path}: {parent} is not a directory", path=path
                ) from exc
            break
        raise _engine_error(exc, path, operation) from exc

    def _owned(self, target: ContainerTarget, directory: str) -> bool:
        """Whether the existing directory ``directory`` lies in a tree of the runtime's user
        (see :meth:`_check_writable`) with no symbolic link on the way: in a workspace its
        links were resolved lexically already; without one, the tree's root and every
        directory between it and ``directory`` are stat'ed (none for the root itself)."""
        for root in self._owned_roots:
            if directory == root:
                return True
            if not directory.startswith(root.rstrip("/") + "/"):
                continue
            if self._boundary is not None:
                return True
            probe = root
            for part in ["", *posixpath.relpath(directory, root).split("/")[:-1]]:
                probe = posixpath.join(probe, part) if part else probe
                try:
                    found = self._engine.stat_path(target.container_id, probe)
                except DockerEngineError:
                    return False
                if found is None or not found.is_directory or found.is_symlink:
                    return False
            return True
        return False

    def _check_writable(
        self, target: ContainerTarget, directory: str, found: PathStat, path: str, operation: str
    ) -> None:
        """Refuse with :class:`RuntimePermissionError` a write into ``directory`` (its stat
        ``found``) that the runtime's user could not make itself — the archive API writes as
        the engine, so the user's permissions are applied here, as the kernel would apply them
        to the user (write and search permission on the directory; root may write anywhere).

        The stat the write already made gives the mode, not the owner. In the runtime's own
        trees (the workspace, or ``remote_root``: made for the user, and written only by its
        commands and by this runtime as that user) a directory reached without a link is taken
        as the user's own, so its owner bits decide (no further request in a workspace; without
        one, a stat per directory between ``remote_root`` and it). Elsewhere, when the mode
        alone does not decide, the owner is read with one more request
        (:meth:`DockerEngine.stat_owned`)."""
        if target.uid == 0:
            return
        mode = found.permissions
        if self._owned(target, directory):
            allowed = mode & 0o300 == 0o300
        elif mode & 0o333 == 0o333:
            allowed = True
        elif mode & 0o333 == 0:
            allowed = False
        else:
            try:
                owned = self._engine.stat_owned(target.container_id, directory)
            except DockerEngineError as exc:
                raise _engine_error(exc, path, operation) from exc
            if owned is None:
                raise RuntimeFileNotFoundError(f"No such directory: {directory}", path=path)
            _, uid, gid = owned
            bits = mode >> 6 if uid == target.uid else mode >> 3 if gid == target.gid else mode
            allowed = bits & 0o3 == 0o3
        if not allowed:
            raise RuntimePermissionError(
                f"Cannot {operation} {path}: permission denied ({directory} is not writable by "
                f"uid {target.uid})",
                path=path,
            )

    def _resolved(self, target: ContainerTarget, path: str, operation: str) -> str:
        """``path`` with every symbolic link among its parents followed lexically, refused when
        one leads out of the workspace (no check without a workspace)."""
        if self._boundary is None:
            return path
        hops = 0
        boundary = self._boundary
        current = path
        restart = True
        while restart:
            restart = False
            if not self._inside(current):
                raise WorkspaceEscapeError(
                    f"Cannot {operation} {path}: a symbolic link leads out of the workspace"
                )
            relative = posixpath.relpath(current, boundary)
            parts = [] if relative == "." else relative.split("/")
            probe = boundary
            for index, part in enumerate(parts[:-1]):
                probe = posixpath.join(probe, part)
                found = self._stat_raw(target, probe, operation)
                if found is None:
                    return current
                if found.is_symlink:
                    hops += 1
                    if hops > _LINK_HOPS:
                        raise InvalidPathError(
                            f"Cannot {operation} {path}: too many levels of symbolic links",
                            path=path,
                        )
                    link = posixpath.normpath(
                        posixpath.join(posixpath.dirname(probe), found.link_target)
                    )
                    current = posixpath.join(link, *parts[index + 1 :])
                    restart = True
                    break
        return current

    def _follow(
        self, target: ContainerTarget, path: str, operation: str
    ) -> tuple[str, PathStat | None]:
        """The path a read reaches (final links followed inside the workspace) and its stat."""
        current = self._resolved(target, path, operation)
        for _ in range(_LINK_HOPS):
            found = self._stat_raw(target, current, operation)
            if found is None or not found.is_symlink:
                return current, found
            link = posixpath.normpath(posixpath.join(posixpath.dirname(current), found.link_target))
            if not self._inside(link):
                raise WorkspaceEscapeError(
                    f"Cannot {operation} {path}: a symbolic link leads out of the workspace"
                )
            current = self._resolved(target, link, operation)
        raise InvalidPathError(
            f"Cannot {operation} {path}: too many levels of symbolic links", path=path
        )

    def _script(self, script: str, path: str, operation: str, *extra: str) -> RawOutcome:
        target = self._target()
        argv = [
            "/bin/sh",
            "-c",
            script,
            "skillruntime-files",
            shell_argument(self._boundary or ""),
            shell_argument(path),
            *extra,
        ]
        outcome = self._run_script(target, argv, 120.0, _SEARCH_CAP)
        code = outcome.exit_code
        if code == 0:
            return outcome
        if code == _MISSING:
            raise RuntimeFileNotFoundError(f"No such file or directory: {path}", path=path)
        if code == _NOT_DIRECTORY:
            raise NotADirectoryFileError(f"Cannot {operation} {path}: not a directory", path=path)
        if code == _DENIED:
            raise RuntimePermissionError(f"Cannot {operation} {path}: permission denied", path=path)
        if code == 7:
            raise RuntimeIsADirectoryError(f"Is a directory: {path}", path=path)
        if code == 8:
            raise NotRegularFileError(f"Not a regular file: {path}", path=path)
        if code == _ESCAPE:
            raise WorkspaceEscapeError(
                f"Cannot {operation} {path}: a symbolic link leads out of the workspace"
            )
        raise _classify(outcome.stderr.decode("utf-8", "replace"), path, operation)

    # ---------------------------------------------------------- primitives

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        target = self._target()
        resolved, found = self._follow(target, path, "read")
        if found is None:
            raise RuntimeFileNotFoundError(f"No such file: {path}", path=path)
        if found.is_directory:
            raise RuntimeIsADirectoryError(f"Is a directory: {path}", path=path)
        if found.is_special:
            raise NotRegularFileError(f"Not a regular file: {path}", path=path)
        try:
            chunks = self._engine.get_archive(target.container_id, resolved, chunk_size)
        except DockerEngineError as exc:
            raise _engine_error(exc, path, "read") from exc
        return self._member_bytes(chunks, path, chunk_size)

    def _member_bytes(
        self, chunks: Iterator[bytes], path: str, chunk_size: int
    ) -> Generator[bytes, None, None]:
        reader = MemberReader(chunks)
        try:
            try:
                member = reader.first()
            except ArchiveMemberError as exc:
                raise NotRegularFileError(f"Cannot read {path}: {exc}", path=path) from exc
            if member is None:
                # The engine sends an empty archive for a name that is not UTF-8: read it
                # with one exec instead (bounded, as the search output is).
                yield from self._cat(path, chunk_size)
                return
            if member.isdir():
                raise RuntimeIsADirectoryError(f"Is a directory: {path}", path=path)
            yield from reader.content(member, chunk_size)
        finally:
            reader.close()
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def _cat(self, path: str, chunk_size: int) -> Iterator[bytes]:
        outcome = self._script(_CAT_SCRIPT, path, "read")
        if outcome.stdout_truncated:
            raise RuntimeFileError(f"Cannot read {path}: too large for this path", path=path)
        data = outcome.stdout
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        target = self._target()
        resolved = self._resolved(target, path, "write")
        parent = posixpath.dirname(resolved)
        existing = self._stat_raw(target, resolved, "write")
        if existing is not None and existing.is_directory:
            raise RuntimeIsADirectoryError(f"Is a directory: {path}", path=path)
        parent_stat = self._stat_raw(target, parent, "write")
        if parent_stat is None:
            self.make_directory(parent)
        elif not parent_stat.is_directory:
            raise NotADirectoryFileError(
                f"Cannot write {path}: {parent} is not a directory", path=path
            )
        else:
            self._check_writable(target, parent, parent_stat, path, "write")
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
            size = 0
            for chunk in chunks:
                spool.write(chunk)
                size += len(chunk)
            spool.seek(0)
            entry = FileEntry(
                posixpath.basename(resolved), size, spool, 0o755 if executable else 0o644
            )
            self._put(target, parent, [entry], path)
        return size

    def _put(
        self,
        target: ContainerTarget,
        directory: str,
        entries: list[DirectoryEntry | FileEntry],
        path: str,
    ) -> None:
        try:
            self._engine.put_archive(
                target.container_id,
                directory,
                tar_stream(entries, uid=target.uid, gid=target.gid),
            )
        except DockerEngineError as exc:
            raise _engine_error(exc, path, "write") from exc

    def stat(self, path: str) -> FileInfo | None:
        target = self._target()
        try:
            _, found = self._follow(target, path, "stat")
        except NotADirectoryFileError:
            return None
        if found is None:
            return None
        return FileInfo(
            path=path,
            is_directory=found.is_directory,
            size=0 if found.is_directory else found.size,
            modified_time=found.mtime,
            is_executable=not found.is_directory and bool(found.permissions & _EXECUTABLE_BITS),
            is_special=found.is_special,
        )

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        outcome = self._script(_LIST_SCRIPT, path, "list", str(depth))
        if outcome.stdout_truncated:
            raise RuntimeFileError(f"Cannot list {path}: the listing is too large", path=path)
        if outcome.stdout.startswith(b"\0"):
            names_part, stats_part = b"", outcome.stdout[1:]
        else:
            names_part, _, stats_part = outcome.stdout.partition(b"\0\0")
        names = names_part.split(b"\0") if names_part else []
        stats = stats_part.decode("ascii", "replace").splitlines()
        if len(stats) != len(names):
            raise RuntimeFileError(
                f"Cannot list {path}: entries changed while it was listed; try again", path=path
            )
        entries = []
        for raw_name, line in zip(names, stats, strict=True):
            mode_hex, size, mtime = line.split()
            mode = int(mode_hex, 16)
            is_dir = stat_module.S_ISDIR(mode)
            is_reg = stat_module.S_ISREG(mode)
            special = not (is_dir or is_reg or stat_module.S_ISLNK(mode))
            entries.append(
                FileInfo(
                    path=raw_name.decode("utf-8", "surrogateescape"),
                    is_directory=is_dir,
                    size=int(size) if is_reg else 0,
                    modified_time=float(mtime),
                    is_executable=is_reg and bool(mode & _EXECUTABLE_BITS),
                    is_special=special,
                )
            )
        entries.sort(key=lambda item: item.path)
        return entries[:limit]

    def delete(self, path: str) -> None:
        self._script(_DELETE_SCRIPT, path, "delete")

    def make_directory(self, path: str) -> None:
        self._script(_MKDIR_SCRIPT, path, "create directory")

    # ------------------------------------------------------ derived, faster

    def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        """Every file as one tar stream (one ``PUT``), below their deepest common directory,
        which is created first when missing."""
        items = [(Path(local), remote, executable) for local, remote, executable in files]
        if not items:
            return 0
        target = self._target()
        common = posixpath.commonpath([posixpath.dirname(remote) for _, remote, _ in items])
        common = self._resolved(target, posixpath.join(common, "x"), "upload")
        common = posixpath.dirname(common)
        found = self._stat_raw(target, common, "upload")
        if found is None:
            self.make_directory(common)
        elif not found.is_directory:
            raise NotADirectoryFileError(
                f"Cannot upload into {common}: not a directory", path=common
            )
        else:
            self._check_writable(target, common, found, common, "upload into")
        self.upload_tree(
            target,
            common,
            [
                (local, posixpath.relpath(remote, common), executable)
                for local, remote, executable in items
            ],
        )
        return len(items)

    def upload_tree(
        self,
        target: ContainerTarget,
        directory: str,
        files: list[tuple[Path, str, bool]],
        *,
        extra: Iterable[FileEntry] = (),
        leading: Iterable[str] = (),
    ) -> None:
        """Extract ``files`` (local path, path relative to ``directory``, executable) into the
        existing ``directory`` as one tar stream; their parent directories are members too, as
        are the directories ``leading`` (relative, before anything else), and the in-memory
        files ``extra`` come last."""
        handles: list[IO[bytes]] = []
        try:
            entries: list[DirectoryEntry | FileEntry] = []
            seen: set[str] = set()
            for name in leading:
                seen.add(name)
                entries.append(DirectoryEntry(name))
            for local, relative, executable in files:
                parent = posixpath.dirname(relative)
                chain = []
                while parent and parent not in seen:
                    seen.add(parent)
                    chain.append(parent)
                    parent = posixpath.dirname(parent)
                entries.extend(DirectoryEntry(name) for name in reversed(chain))
                try:
                    handle: IO[bytes] = local.open("rb")
                except OSError as exc:
                    raise RuntimeFileError(
                        f"Cannot upload {local}: {exc.strerror}", path=relative
                    ) from exc
                handles.append(handle)
                size = os.fstat(handle.fileno()).st_size
                entries.append(FileEntry(relative, size, handle, 0o755 if executable else 0o644))
            entries.extend(extra)
            self._put(target, directory, entries, directory)
        finally:
            for handle in handles:
                handle.close()

    def place_below(
        self,
        target: ContainerTarget,
        anchor: str,
        directory: str,
        files: list[tuple[Path, str, bool]],
        *,
        extra: Iterable[tuple[str, bytes]] = (),
    ) -> bool:
        """Write ``files`` (local path, path relative to ``directory``, executable) and the
        in-memory files ``extra`` (path relative to ``directory``, bytes; written last) below
        ``directory`` with **one** ``PUT`` to ``anchor``, an existing directory that is no
        symbolic link (the workspace volume's mount point, or the container's ``remote_root``)
        at or above ``directory``. No stat or exec is needed first:

        * every directory from ``anchor`` (exclusive) down to ``directory`` and every file's
          parent is a member of the archive, in order, so the engine's extraction creates what
          is missing and *replaces* whatever non-directory it finds on the way — a symbolic
          link planted in the workspace is removed and a real directory made in its place, so
          nothing is written through a link (and a link the container plants cannot make the
          write leave the workspace);
        * a file of a member replaces a link or directory at its place the same way (the
          engine removes a non-matching entry before extracting).

        Directories on the way are owned by the runtime's user with mode ``0755`` afterwards.
        ``False`` (nothing written) when ``anchor`` does not exist in the container; engine
        refusals are the typed file errors of a write."""
        relative = posixpath.relpath(directory, anchor)
        if relative.startswith("..") or posixpath.isabs(relative):
            raise ValueError(f"{directory} is not below {anchor}")
        prefix = "" if relative == "." else relative
        leading: list[str] = []
        if prefix:
            parts = prefix.split("/")
            leading = ["/".join(parts[: index + 1]) for index in range(len(parts))]
        memory = [
            FileEntry(posixpath.join(prefix, name), len(data), io.BytesIO(data))
            for name, data in extra
        ]
        try:
            self.upload_tree(
                target,
                anchor,
                [
                    (local, posixpath.join(prefix, relative_path), executable)
                    for local, relative_path, executable in files
                ],
                extra=memory,
                leading=leading,
            )
        except RuntimeFileNotFoundError:
            return False
        return True

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One archive of the tree (one ``GET``) replayed as the default walk; the default walk
        on the primitives when the tree is too large (see :meth:`_tree`)."""
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
        """One archive of the tree and its files (one ``GET``), searched as the default does;
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
        than it, from one archive of the directory; ``None`` when the archive passes
        :data:`_TREE_BYTES` or holds more than :data:`_SEARCH_CAP` of kept files (walk then).

        Archive members are taken as the engine names them below the directory; a member whose
        name leaves it is refused (the search walks instead)."""
        target = self._target()
        resolved = self._resolved(target, posixpath.join(root.path, "x"), "search")
        directory = posixpath.dirname(resolved)
        try:
            chunks = self._engine.get_archive(target.container_id, directory, CHUNK_SIZE)
        except DockerEngineError as exc:
            logger.debug("archive of %s refused (%s); walking instead", directory, exc)
            return None
        reader = _CountingChunks(chunks, _TREE_BYTES)
        records: list[bytes] = []
        contents: dict[str, bytes] = {}
        kept = 0
        top = posixpath.basename(directory.rstrip("/")) or "/"
        parent = root.path.rstrip("/")
        try:
            with tarfile.open(fileobj=cast("IO[bytes]", reader), mode="r|") as archive:
                for member in archive:
                    name = member.name.rstrip("/")
                    if name.startswith("/") or ".." in name.split("/"):
                        raise ArchiveMemberError(f"archive member refused: {name!r}")
                    if name == top:
                        continue
                    if not name.startswith(top + "/"):
                        raise ArchiveMemberError(f"archive member outside {top}: {name!r}")
                    path = parent + "/" + name[len(top) + 1 :]
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
                            return None
                        contents[path] = data
        except (tarfile.TarError, ArchiveMemberError, _TooLargeError) as exc:
            logger.debug("archive of %s unusable (%s); walking instead", directory, exc)
            return None
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
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
