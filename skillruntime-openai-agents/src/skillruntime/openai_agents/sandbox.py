"""A sandbox client of the OpenAI Agents SDK (sandbox agents, beta) over any skillruntime runtime.

:class:`SkillRuntimeSandboxClient` creates :class:`SkillRuntimeSandboxSession` objects, each bound
to one skillruntime **conversation**: the session's workspace (the SDK's ``manifest.root``) is the
runtime's conversation workspace (``default_working_directory``), commands run through
``AsyncSkillRuntime.execute`` and every file operation through the runtime's file system, never
the host. The session state the SDK serialises (:class:`SkillRuntimeSandboxSessionState`) carries
the conversation id; ``resume`` on any node opens the same conversation again (the runtime's
conversation store finds the sandbox, e.g. OpenSandbox with a SQL store), so a paused run resumes
elsewhere without uploading a workspace snapshot.

Lifecycle: ``delete`` (called by the SDK's ``Runner`` at the end of a run it owns) closes this
node's runtime and keeps the conversation's workspace, which is what makes resume work;
:meth:`SkillRuntimeSandboxClient.end_conversation` discards it for good.

Mapping notes: ``exec(..., shell=True)`` runs the joined command in the runtime's own shell
(``bash -c``, ``sh -c`` where bash is missing) instead of the SDK's ``sh -lc`` login shell, so one
command is one process tree as on the runtime; a custom shell prefix list and ``shell=False`` argv
are quoted with :func:`shlex.join`. Output is decoded text in skillruntime (bounded per stream,
head and tail kept) and is handed back UTF-8 encoded. A timeout raises the SDK's
``ExecTimeoutError``. File operations act as the runtime's own user: a ``user=`` other than
``None`` is refused (``exec`` still honours it through ``sudo -u`` as the SDK does).

Snapshots (:meth:`~SkillRuntimeSandboxSession.persist_workspace`): a symbolic link of the
workspace is stored as a link (its target verbatim), never read through, so a command's
``ln -s / x`` no longer makes the snapshot fail. Restoring
(:meth:`~SkillRuntimeSandboxSession.hydrate_workspace`) creates, after every other member, only
the links whose target stays inside the workspace; a link leading outside (an absolute target
elsewhere, a relative one climbing out) is skipped with a warning, because a restored link would
carry the writes of commands and tools outside the workspace and a snapshot could plant one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import posixpath
import shlex
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal, cast

from agents.sandbox.errors import (
    ExecTimeoutError,
    ExecTransportError,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
    WorkspaceWriteTypeError,
)
from agents.sandbox.files import EntryKind, FileEntry
from agents.sandbox.manifest import Manifest
from agents.sandbox.session import SandboxSession, SandboxSessionState
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.session.dependencies import Dependencies
from agents.sandbox.session.manager import Instrumentation
from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions
from agents.sandbox.snapshot import (
    LocalSnapshotSpec,
    NoopSnapshotSpec,
    SnapshotBase,
    SnapshotSpec,
    resolve_snapshot,
)
from agents.sandbox.snapshot_defaults import resolve_default_local_snapshot_spec
from agents.sandbox.types import ExecResult, Permissions, User
from agents.sandbox.workspace_paths import sandbox_path_str

from skillruntime.core.errors import (
    FileTooLargeError,
    RuntimeFileNotFoundError,
    SkillRuntimeError,
)
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.files.spi import CHUNK_SIZE
from skillruntime.core.models import FileInfo, SkillExecutionRequest
from skillruntime.core.plugins.registry import (
    build_runtime_options,
    create_async_runtime,
    get_runtime_provider,
)
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.bridge import to_async
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.runtime.workspace import validate_conversation_id

__all__ = [
    "BACKEND_ID",
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "SPOOL_BYTES",
    "RuntimeFactory",
    "SkillRuntimeSandboxClient",
    "SkillRuntimeSandboxClientOptions",
    "SkillRuntimeSandboxSession",
    "SkillRuntimeSandboxSessionState",
]

logger = logging.getLogger(__name__)

BACKEND_ID = "skillruntime"
"""The SDK backend id and the ``type`` discriminator of the options and the session state."""

DEFAULT_EXEC_TIMEOUT_SECONDS = 600.0
"""Timeout of an ``exec`` the SDK calls without one (a runtime command always has a timeout)."""

SPOOL_BYTES = 8 * 1024 * 1024
"""Bytes a ``read`` stream keeps in memory before it spills to a temporary file."""

_LIST_DEPTH = 64
_LIST_LIMIT = 200_000
_LINK_TIMEOUT_SECONDS = 120.0
_LIST_LINKS = (
    "find . -type l -exec sh -c "
    + shlex.quote('for l do printf "%s\\0" "$l"; readlink -- "$l"; printf "\\0"; done')
    + " sh {} +"
)
"""Prints ``./name NUL target NEWLINE NUL`` for every symbolic link under the working directory."""
_MAKE_LINK = (
    'root=$(pwd -P) && parent=$(cd -P -- "$1" && pwd -P) || exit 2\n'
    'case "$parent/" in "$root"/*) ;; *) exit 3 ;; esac\n'
    'if [ -d "$2" ] && [ ! -L "$2" ]; then exit 4; fi\n'
    'rm -f -- "$2" && ln -s -- "$3" "$2"'
)
"""Creates link ``$2`` (relative to the workspace) to ``$3`` in directory ``$1``, which must
resolve inside the workspace; a directory in the way is refused (exit 4), a file replaced."""
_DEFAULT_MANIFEST_ROOT = Manifest().root

RuntimeFactory = Callable[[str], AsyncSkillRuntime | SkillRuntime]
"""Builds the runtime of one conversation from its id (a sync runtime is served through
:func:`skillruntime.core.runtime.bridge.to_async`). It is called once per created or resumed
session."""


class SkillRuntimeSandboxClientOptions(BaseSandboxClientOptions):
    """Options of :meth:`SkillRuntimeSandboxClient.create`: the conversation to open (a new
    random id when ``None``)."""

    type: Literal["skillruntime"] = "skillruntime"
    conversation_id: str | None = None


class SkillRuntimeSandboxSessionState(SandboxSessionState):
    """The SDK session state of a skillruntime session: the conversation id (what ``resume``
    reopens) and the runtime name it was created with (checked on resume)."""

    type: Literal["skillruntime"] = "skillruntime"
    conversation_id: str
    runtime_name: str = ""


def _entry(info: FileInfo) -> FileEntry:
    if info.is_directory:
        kind = EntryKind.DIRECTORY
    elif info.is_special:
        kind = EntryKind.OTHER
    else:
        kind = EntryKind.FILE
    owner = 0o7 if info.is_executable or info.is_directory else 0o6
    return FileEntry(
        path=info.path,
        permissions=Permissions(owner=owner, group=0, other=0, directory=info.is_directory),
        owner="",
        group="",
        size=info.size,
        kind=kind,
    )


def _chunks(data: io.IOBase, path: Path) -> Iterator[bytes]:
    while True:
        chunk = data.read(CHUNK_SIZE)
        if not chunk:
            return
        if isinstance(chunk, str):
            raise WorkspaceWriteTypeError(path=path, actual_type="str")
        yield bytes(chunk)


class SkillRuntimeSandboxSession(BaseSandboxSession):
    """One SDK sandbox session over one conversation's :class:`AsyncSkillRuntime`.

    The session owns the runtime it was given: ``shutdown`` closes it (a conversation's sandbox
    and workspace are kept by the runtime's own rules).
    """

    state: SkillRuntimeSandboxSessionState

    def __init__(
        self,
        state: SkillRuntimeSandboxSessionState,
        runtime: AsyncSkillRuntime,
        *,
        preserved: bool,
        default_timeout_seconds: float = DEFAULT_EXEC_TIMEOUT_SECONDS,
    ) -> None:
        self.state = state
        self._runtime = runtime
        self._files: AsyncSkillRuntimeFileSystem | None = None
        self._closed = False
        self._default_timeout = default_timeout_seconds
        # A resumed conversation keeps its workspace: start() reuses it instead of reapplying the
        # whole manifest or restoring a snapshot.
        self._set_start_state_preserved(preserved)

    @property
    def runtime(self) -> AsyncSkillRuntime:
        """The conversation's runtime (for :mod:`skillruntime.openai_agents.skills` and tools)."""
        return self._runtime

    async def file_system(self) -> AsyncSkillRuntimeFileSystem:
        """The runtime's file system (fetched once)."""
        if self._files is None:
            self._files = await self._runtime.get_file_system()
        return self._files

    def _target(self, path: Path | str, *, for_write: bool = False) -> str:
        return sandbox_path_str(self.normalize_path(path, for_write=for_write))

    @staticmethod
    def _check_user(user: str | User | None) -> None:
        if user is not None:
            raise ValueError(
                "skillruntime file operations act as the runtime's own user; user= is not supported"
            )

    # ------------------------------------------------------------------ commands

    async def exec(
        self,
        *command: str | Path,
        timeout: float | None = None,
        shell: bool | list[str] = True,
        user: str | User | None = None,
    ) -> ExecResult:
        """Run ``command`` in the runtime (see the module docs for the shell mapping)."""
        if shell is True and user is None:
            parts = [str(part) for part in command]
            joined = parts[0] if len(parts) == 1 else shlex.join(parts)
            return await self._run(joined, parts, timeout)
        return await super().exec(*command, timeout=timeout, shell=shell, user=user)

    async def _exec_internal(
        self, *command: str | Path, timeout: float | None = None
    ) -> ExecResult:
        parts = [str(part) for part in command]
        return await self._run(shlex.join(parts), parts, timeout)

    async def _run(self, line: str, parts: list[str], timeout: float | None) -> ExecResult:
        seconds = self._default_timeout if timeout is None else timeout
        if seconds <= 0:
            raise ValueError("timeout must be positive")
        environment = await self.state.manifest.environment.resolve()
        request = SkillExecutionRequest(
            command=line,
            working_directory=self.state.manifest.root,
            timeout_seconds=seconds,
            environment=environment,
        )
        try:
            result = await self._runtime.execute(request)
        except SkillRuntimeError as exc:
            raise ExecTransportError(command=parts, cause=exc) from exc
        if result.timed_out:
            raise ExecTimeoutError(command=parts, timeout_s=seconds)
        return ExecResult(
            stdout=result.stdout.encode("utf-8", "surrogateescape"),
            stderr=result.stderr.encode("utf-8", "surrogateescape"),
            exit_code=result.exit_code,
        )

    # --------------------------------------------------------------------- files

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        """The file's bytes as a binary stream, memory bounded by :data:`SPOOL_BYTES`.

        A file up to that size is read in one ``read_bytes`` call of the runtime (its fastest
        path); a larger one makes that call stop at the limit and is then streamed into a
        temporary file (so the first :data:`SPOOL_BYTES` are read twice).
        """
        self._check_user(user)
        target = self._target(path)
        files = await self.file_system()
        try:
            return io.BytesIO(await files.read_bytes(target, max_bytes=SPOOL_BYTES))
        except FileTooLargeError:
            pass
        except RuntimeFileNotFoundError as exc:
            raise WorkspaceReadNotFoundError(path=Path(target), cause=exc) from exc
        spill = tempfile.TemporaryFile()  # noqa: SIM115 - returned
        try:
            async with contextlib.aclosing(files.read_stream(target)) as stream:
                async for chunk in stream:
                    spill.write(chunk)
        except RuntimeFileNotFoundError as exc:
            spill.close()
            raise WorkspaceReadNotFoundError(path=Path(target), cause=exc) from exc
        except BaseException:
            spill.close()
            raise
        spill.seek(0)
        return cast(io.IOBase, spill)

    async def _read_bounded(self, path: Path, *, max_bytes: int) -> bytes:
        target = self._target(path)
        files = await self.file_system()
        buffer = bytearray()
        try:
            async with contextlib.aclosing(files.read_stream(target)) as stream:
                async for chunk in stream:
                    buffer.extend(chunk[: max_bytes - len(buffer)])
                    if len(buffer) >= max_bytes:
                        break
        except RuntimeFileNotFoundError as exc:
            raise WorkspaceReadNotFoundError(path=Path(target), cause=exc) from exc
        return bytes(buffer)

    async def write(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        """Stream ``data`` (a binary file object) into the file; parents are created."""
        self._check_user(user)
        target = self._target(path, for_write=True)
        files = await self.file_system()
        await files.write_stream(target, _chunks(data, Path(target)))

    async def ls(self, path: Path | str, *, user: str | User | None = None) -> list[FileEntry]:
        """The entries directly below ``path``."""
        self._check_user(user)
        target = self._target(path)
        files = await self.file_system()
        try:
            infos = await files.list_directory(target, depth=1)
        except RuntimeFileNotFoundError as exc:
            raise WorkspaceReadNotFoundError(path=Path(target), cause=exc) from exc
        return [_entry(info) for info in infos]

    async def mkdir(
        self, path: Path | str, *, parents: bool = False, user: str | User | None = None
    ) -> None:
        """Create a directory; without ``parents`` its parent must exist and it must not."""
        self._check_user(user)
        target = self._target(path, for_write=True)
        files = await self.file_system()
        existing = await files.stat(target)
        if existing is not None:
            if existing.is_directory and parents:
                return
            raise WorkspaceArchiveWriteError(path=Path(target), context={"reason": "exists"})
        if not parents:
            parent = await files.stat(posixpath.dirname(target))
            if parent is None or not parent.is_directory:
                raise WorkspaceArchiveWriteError(
                    path=Path(target), context={"reason": "parent_missing"}
                )
        await files.make_directory(target)

    async def rm(
        self, path: Path | str, *, recursive: bool = False, user: str | User | None = None
    ) -> None:
        """Remove a file, or a directory tree with ``recursive`` (a missing path is then fine).
        The workspace root itself is never removed."""
        self._check_user(user)
        target = self._target(path, for_write=True)
        if posixpath.normpath(target) == posixpath.normpath(self.state.manifest.root):
            raise WorkspaceArchiveWriteError(path=Path(target), context={"reason": "root"})
        files = await self.file_system()
        existing = await files.stat(target)
        if existing is None:
            if recursive:
                return
            raise WorkspaceReadNotFoundError(path=Path(target))
        if (
            existing.is_directory
            and not recursive
            and await files.list_directory(target, depth=1, limit=1)
        ):
            raise WorkspaceArchiveWriteError(
                path=Path(target), context={"reason": "directory_not_empty"}
            )
        await files.delete(target)

    # ----------------------------------------------------------------- lifecycle

    async def running(self) -> bool:
        return not self._closed

    async def _shutdown_backend(self) -> None:
        await self.release_runtime()

    async def release_runtime(self) -> None:
        """Close this node's runtime once (later calls do nothing); the conversation's
        workspace is kept. The SDK's ``shutdown`` ends here too (through its backend hook)."""
        if self._closed:
            return
        self._closed = True
        await self._runtime.close()

    async def persist_workspace(self) -> io.IOBase:
        """The workspace as a tar stream with workspace-relative member names (spooled).

        Symbolic links are stored as links (``SYMTYPE`` members with their target verbatim) and
        never followed, wherever they lead; special files are left out. Not needed to resume a
        conversation (the runtime keeps its workspace); used only when a run is configured with
        an SDK snapshot.
        """
        files = await self.file_system()
        root = self.state.manifest.root
        skipped = {path.as_posix() for path in self._persist_workspace_skip_relpaths()}
        links = await self._workspace_links(root)

        def left_out(relative: str) -> bool:
            if any(relative == s or relative.startswith(s + "/") for s in skipped):
                return True
            parts = relative.split("/")
            return any("/".join(parts[:end]) in links for end in range(1, len(parts)))

        infos = await files.list_directory(root, depth=_LIST_DEPTH, limit=_LIST_LIMIT)
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - returned
        try:
            with tarfile.open(fileobj=cast(IO[bytes], spool), mode="w") as archive:
                for info in infos:
                    relative = posixpath.relpath(info.path, root)
                    if relative in links or left_out(relative):
                        continue
                    member = tarfile.TarInfo(relative)
                    if info.is_directory:
                        member.type = tarfile.DIRTYPE
                        member.mode = 0o755
                        archive.addfile(member)
                        continue
                    if info.is_special:
                        continue
                    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as content:
                        async with contextlib.aclosing(files.read_stream(info.path)) as stream:
                            async for chunk in stream:
                                content.write(chunk)
                        member.size = content.tell()
                        member.mode = 0o755 if info.is_executable else 0o644
                        content.seek(0)
                        archive.addfile(member, cast(IO[bytes], content))
                for relative, target in sorted(links.items()):
                    if left_out(relative):
                        continue
                    member = tarfile.TarInfo(relative)
                    member.type = tarfile.SYMTYPE
                    member.linkname = target
                    member.mode = 0o777
                    archive.addfile(member)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return cast(io.IOBase, spool)

    async def _workspace_links(self, root: str) -> dict[str, str]:
        """The symbolic links under ``root``: workspace-relative name → target (one ``find``
        in the runtime; a runtime without ``find``/``readlink`` reports none)."""
        request = SkillExecutionRequest(
            command=_LIST_LINKS, working_directory=root, timeout_seconds=_LINK_TIMEOUT_SECONDS
        )
        try:
            result = await self._runtime.execute(request)
        except SkillRuntimeError as exc:
            raise WorkspaceArchiveReadError(path=Path(root), cause=exc) from exc
        if result.timed_out or result.stdout_truncated:
            # A cut listing could pair names with the wrong targets: no snapshot rather than that.
            reason = "links_timeout" if result.timed_out else "links_truncated"
            raise WorkspaceArchiveReadError(path=Path(root), context={"reason": reason})
        if result.exit_code != 0:
            logger.warning("listing the links of the workspace exited with %d", result.exit_code)
        fields = result.stdout.split("\0")
        links: dict[str, str] = {}
        for name, target in zip(fields[0:-1:2], fields[1::2], strict=False):
            if name.startswith("./") and target.endswith("\n"):
                links[posixpath.normpath(name[2:])] = target[:-1]
        return links

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        """Extract a tar stream of :meth:`persist_workspace` under the workspace root.

        Fails closed: absolute or ``..`` member names, hard links, special files and members
        under a link of the archive are refused before anything of that member is written.
        Symbolic links are created after every other member, and only those whose target stays
        inside the workspace; a link leading outside is skipped with a warning (see the module
        docs).
        """
        files = await self.file_system()
        root = self.state.manifest.root
        links: dict[str, str] = {}
        written: set[str] = set()
        try:
            archive = tarfile.open(fileobj=cast(IO[bytes], data), mode="r|*")  # noqa: SIM115
        except tarfile.TarError as exc:
            raise WorkspaceArchiveReadError(path=Path(root), cause=exc) from exc
        with archive:
            for member in archive:
                name = posixpath.normpath(member.name)
                if name.startswith("/") or name in {".", ".."} or name.startswith("../"):
                    raise WorkspaceArchiveWriteError(
                        path=Path(root), context={"reason": "unsafe_member"}
                    )
                target = self._target(posixpath.join(root, name), for_write=True)
                parts = name.split("/")
                if any("/".join(parts[:end]) in links for end in range(1, len(parts) + 1)):
                    raise WorkspaceArchiveWriteError(
                        path=Path(target), context={"reason": "member_under_link"}
                    )
                if member.issym():
                    if any(item.startswith(name + "/") for item in written):
                        raise WorkspaceArchiveWriteError(
                            path=Path(target), context={"reason": "member_under_link"}
                        )
                    links[name] = member.linkname
                    continue
                written.add(name)
                if member.isdir():
                    await files.make_directory(target)
                elif member.isfile():
                    handle = archive.extractfile(member)
                    if handle is None:
                        raise WorkspaceArchiveWriteError(path=Path(target))
                    with handle:
                        await files.write_stream(
                            target,
                            _tar_chunks(handle),
                            executable=bool(member.mode & 0o100),
                        )
                else:
                    raise WorkspaceArchiveWriteError(
                        path=Path(target), context={"reason": "unsupported_member_type"}
                    )
        for name, link_target in links.items():
            if not _link_stays_inside(root, name, link_target):
                logger.warning(
                    "not restoring the symbolic link %s of the snapshot: it leads outside the "
                    "workspace",
                    name,
                )
                continue
            await self._make_link(root, name, link_target)

    async def _make_link(self, root: str, name: str, link_target: str) -> None:
        """Create the link ``name`` → ``link_target`` inside the workspace (its directory must
        resolve inside it; a directory in the way is refused)."""
        directory = posixpath.dirname(name) or "."
        target = self._target(posixpath.join(root, name), for_write=True)
        files = await self.file_system()
        if directory != ".":
            await files.make_directory(
                self._target(posixpath.join(root, directory), for_write=True)
            )
        command = shlex.join(["sh", "-c", _MAKE_LINK, "sh", directory, name, link_target])
        request = SkillExecutionRequest(
            command=command, working_directory=root, timeout_seconds=_LINK_TIMEOUT_SECONDS
        )
        try:
            result = await self._runtime.execute(request)
        except SkillRuntimeError as exc:
            raise WorkspaceArchiveWriteError(path=Path(target), cause=exc) from exc
        if not result.ok:
            reason = {3: "link_outside", 4: "link_over_directory"}.get(
                result.exit_code, "link_failed"
            )
            raise WorkspaceArchiveWriteError(path=Path(target), context={"reason": reason})


def _link_stays_inside(root: str, name: str, link_target: str) -> bool:
    """Whether the link ``name`` (workspace-relative) → ``link_target`` names a path inside the
    workspace ``root``, read lexically (an empty target or a NUL is not)."""
    if not link_target or "\0" in link_target:
        return False
    if link_target.startswith("/"):
        resolved = posixpath.normpath(link_target)
        base = posixpath.normpath(root)
        return resolved == base or resolved.startswith(base.rstrip("/") + "/")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), link_target))
    return not (resolved == ".." or resolved.startswith("../") or resolved.startswith("/"))


def _tar_chunks(handle: IO[bytes]) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK_SIZE):
        yield chunk


def _is_default_host_snapshot(snapshot: SnapshotSpec | SnapshotBase | None) -> bool:
    if not isinstance(snapshot, LocalSnapshotSpec):
        return False
    try:
        return snapshot == resolve_default_local_snapshot_spec()
    except OSError:
        return False


def _as_async(runtime: AsyncSkillRuntime | SkillRuntime) -> AsyncSkillRuntime:
    if isinstance(runtime, SkillRuntime):
        return to_async(runtime)
    return runtime


def _inner(session: SandboxSession | BaseSandboxSession) -> SkillRuntimeSandboxSession:
    # The SDK wraps every session its clients hand out and offers no public way back to the
    # backend session; its own clients (unix_local, docker) read the attribute as well.
    inner = session._inner if isinstance(session, SandboxSession) else session  # noqa: SLF001
    if not isinstance(inner, SkillRuntimeSandboxSession):
        raise TypeError("expected a session created by SkillRuntimeSandboxClient")
    return inner


class SkillRuntimeSandboxClient(BaseSandboxClient[SkillRuntimeSandboxClientOptions | None]):
    """Creates and resumes SDK sandbox sessions over skillruntime conversations.

    ``factory`` builds the runtime of a conversation id; :meth:`for_runtime` builds one from a
    registered runtime name and its options (``create_async_runtime(name,
    conversation_id=..., **options)``), which every runtime of this project supports.

    Snapshots: the ``Runner`` gives every session it creates a host-directory snapshot by
    default, which would tar the workspace to this host at each run end. A conversation keeps its
    workspace, so that implicit default is replaced by no snapshot (``keep_default_snapshot=True``
    keeps it); a snapshot passed explicitly (``SandboxRunConfig(snapshot=...)``) is used as given.
    """

    backend_id = BACKEND_ID
    supports_default_options = True

    def __init__(
        self,
        factory: RuntimeFactory,
        *,
        default_timeout_seconds: float = DEFAULT_EXEC_TIMEOUT_SECONDS,
        instrumentation: Instrumentation | None = None,
        dependencies: Dependencies | None = None,
        keep_default_snapshot: bool = False,
    ) -> None:
        if default_timeout_seconds <= 0:
            raise ValueError("default_timeout_seconds must be positive")
        self._factory = factory
        self._default_timeout = default_timeout_seconds
        self._instrumentation = (
            instrumentation if instrumentation is not None else Instrumentation()
        )
        self._dependencies = dependencies
        self._keep_default_snapshot = keep_default_snapshot

    @classmethod
    def for_runtime(cls, name: str, /, **options: Any) -> SkillRuntimeSandboxClient:
        """A client whose conversations are runtimes ``name`` built with ``options`` (validated
        now, so a wrong option fails here rather than in the first run)."""
        if "conversation_id" in options:
            raise ValueError("conversation_id is chosen per session (client options)")
        build_runtime_options(get_runtime_provider(name), {**options, "conversation_id": "check"})

        def factory(conversation_id: str) -> AsyncSkillRuntime:
            return create_async_runtime(name, conversation_id=conversation_id, **options)

        return cls(factory)

    def _open(self, conversation_id: str) -> AsyncSkillRuntime:
        return _as_async(self._factory(validate_conversation_id(conversation_id)))

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: SkillRuntimeSandboxClientOptions | None = None,
    ) -> SandboxSession:
        """A session on conversation ``options.conversation_id`` (new when ``None``).

        The manifest's root becomes the conversation workspace; a manifest naming another root
        than the SDK default or that workspace is refused.
        """
        conversation_id = (options.conversation_id if options else None) or uuid.uuid4().hex
        manifest = manifest if manifest is not None else Manifest()
        self._validate_manifest_for_create(manifest)
        runtime = self._open(conversation_id)
        root = runtime.default_working_directory
        if manifest.root not in (_DEFAULT_MANIFEST_ROOT, root):
            await runtime.close()
            raise ValueError(
                f"manifest.root must be the conversation workspace {root!r} or left at its default"
            )
        manifest = manifest.model_copy(update={"root": root}, deep=True)
        session_id = uuid.uuid4()
        if not self._keep_default_snapshot and _is_default_host_snapshot(snapshot):
            snapshot = NoopSnapshotSpec()
        state = SkillRuntimeSandboxSessionState(
            session_id=session_id,
            manifest=manifest,
            snapshot=resolve_snapshot(snapshot, str(session_id)),
            conversation_id=conversation_id,
            runtime_name=runtime.name,
        )
        inner = SkillRuntimeSandboxSession(
            state, runtime, preserved=False, default_timeout_seconds=self._default_timeout
        )
        logger.debug("created session on conversation %s (%s)", conversation_id, runtime.name)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        """Reopen the state's conversation: same workspace, no snapshot needed."""
        if not isinstance(state, SkillRuntimeSandboxSessionState):
            raise TypeError("SkillRuntimeSandboxClient.resume expects a skillruntime session state")
        state.assert_path_grants_rebound()
        runtime = self._open(state.conversation_id)
        problem = None
        if state.runtime_name and runtime.name != state.runtime_name:
            problem = f"runtime {runtime.name!r} cannot resume a {state.runtime_name!r} session"
        elif runtime.default_working_directory != state.manifest.root:
            problem = "the conversation workspace differs from the session's manifest root"
        if problem is not None:
            await runtime.close()
            raise ValueError(problem)
        inner = SkillRuntimeSandboxSession(
            state, runtime, preserved=True, default_timeout_seconds=self._default_timeout
        )
        logger.debug("resumed session on conversation %s", state.conversation_id)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        """Release this node's runtime; the conversation's workspace is kept (resumable)."""
        inner = _inner(session)
        await inner.release_runtime()
        return session

    async def end_conversation(
        self, target: SandboxSession | BaseSandboxSession | SandboxSessionState
    ) -> None:
        """Discard a conversation (given by a session or its state): a sandbox that belongs to it
        is destroyed (the runtime's ``destroy_conversation_sandbox`` where it has one), otherwise
        the workspace's contents are deleted. A session still open is closed; a closed one's
        conversation is reopened for the purpose."""
        if isinstance(target, SandboxSessionState):
            state, inner = target, None
        else:
            inner = _inner(target)
            state = inner.state
        if not isinstance(state, SkillRuntimeSandboxSessionState):
            raise TypeError("expected a skillruntime session state")
        if inner is not None and await inner.running():
            runtime = inner.runtime
        else:
            runtime = self._open(state.conversation_id)
        sync = getattr(runtime, "sync_runtime", runtime)
        destroy = getattr(runtime, "destroy_conversation_sandbox", None) or getattr(
            sync, "destroy_conversation_sandbox", None
        )
        try:
            if destroy is not None:
                if inspect.iscoroutinefunction(destroy):
                    await destroy()
                else:
                    await asyncio.to_thread(destroy)
            else:
                files = await runtime.get_file_system()
                root = runtime.default_working_directory
                for info in await files.list_directory(root, depth=1):
                    await files.delete(info.path)
        finally:
            if inner is not None:
                await inner.release_runtime()
            if inner is None or runtime is not inner.runtime:
                await runtime.close()

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, SkillRuntimeSandboxSessionState)
