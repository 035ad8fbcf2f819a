"""``LocalSkillRuntime``: skill commands and files on the host. Not a sandbox.

Three modes, chosen by the constructor arguments:

* **Conversation** (``conversation_id``): the workspace is ``<conversations_root>/<id>``
  (``conversations_root`` defaults to :data:`DEFAULT_CONVERSATIONS_ROOT`). It is created on first
  use, is the default working directory, and scopes every file operation and working directory;
  symbolic links are resolved, so a link cannot carry an operation out of it. Resolution is
  race-free: paths are walked through directory descriptors of the workspace, and a command's
  working directory is entered through the descriptor the check opened, so a directory swapped
  for a link meanwhile changes nothing. Skills are copied to
  ``<workspace>/skills/<name>-<digest12>/``.
* **Work root** (``work_root``, no conversation): skills are copied to
  ``<work_root>/skills/<name>-<digest12>/``; the work root is the default working directory.
  Paths are not confined.
* **In place** (neither): skills are used where they are (bootstrap commands run in, and may
  write to, the source directory); the default working directory is the process's working
  directory when the runtime was built. Paths are not confined.

Relative paths and working directories resolve against the default working directory. A missing
working directory raises :class:`ExecutionTransportError` (the command could not be started).
:meth:`close` deletes no workspace and no prepared copy; it kills the process groups of commands
still running in other threads, whose ``execute`` then raises :class:`RuntimeClosedError`.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from skillruntime.core.conversation_leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.conversations import ConversationStore
from skillruntime.core.errors import (
    ExecutionTransportError,
    InvalidPathError,
    RuntimeFileError,
    WorkspaceEscapeError,
)
from skillruntime.core.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ExclusiveRuntimeMixin,
    local_service_key,
    workspace_guard,
)
from skillruntime.core.filesystem import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime import BaseSkillRuntime
from skillruntime.core.skillfiles import (
    DEFAULT_UPLOAD_POLICY,
    SkillFile,
    UploadPolicy,
    copy_skill_files,
)
from skillruntime.core.workspace import ConversationWorkspace

from .confinement import MAX_SYMLINK_HOPS, ConfinedRoot, open_directory_below
from .filesystem import LocalFileSystem
from .process import (
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_KILL_GRACE_SECONDS,
    ProcessRegistry,
    run_command,
)

__all__ = ["DEFAULT_CONVERSATIONS_ROOT", "LocalSkillRuntime", "default_shell"]

logger = logging.getLogger(__name__)

DEFAULT_CONVERSATIONS_ROOT = Path("~/.skillruntime/conversations")
"""Root of conversation workspaces when a conversation id is given without a root (expanded)."""


def default_shell() -> str:
    """Absolute path of ``bash``, or of ``sh`` where bash is missing."""
    return shutil.which("bash") or shutil.which("sh") or "/bin/sh"


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


class LocalSkillRuntime(ExclusiveRuntimeMixin, BaseSkillRuntime):
    """Runs skill commands with ``bash -c`` on this host; see the module docs for the modes.

    ``base_environment`` is the lowest layer of the command environment overlay, on top of this
    process's environment (or of nothing when ``inherit_environment`` is false).
    ``kill_grace_seconds`` is the time between ``SIGTERM`` and ``SIGKILL`` of a timed-out command;
    ``drain_seconds`` how long background processes may hold the output pipes after the shell
    exited before they are stopped. ``shell`` overrides the shell (default: bash, else sh).

    ``conversation_store`` (a store or a URL; one built from a URL is closed with the runtime)
    records the conversation and its activity, so that ``skillruntime conversations sweep``
    can remove an idle workspace. ``exclusive=True`` (needs the store) makes every prepare,
    execute and file operation hold the conversation's lease: processes and nodes sharing the
    workspace take turns (see :mod:`skillruntime.core.exclusive`).
    """

    def __init__(
        self,
        *,
        conversation_id: str | None = None,
        conversations_root: str | os.PathLike[str] | None = None,
        work_root: str | os.PathLike[str] | None = None,
        base_environment: Mapping[str, str] | None = None,
        inherit_environment: bool = True,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        kill_grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        shell: str | None = None,
        conversation_store: ConversationStore | str | None = None,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ) -> None:
        workspace = _workspace_for(conversation_id, conversations_root, work_root)
        super().__init__(
            base_environment=base_environment, workspace=workspace, upload_policy=upload_policy
        )
        if kill_grace_seconds < 0 or drain_seconds < 0:
            raise ValueError("kill_grace_seconds and drain_seconds must not be negative")
        self._work_root = _absolute(work_root) if work_root is not None else None
        self._confinement: ConfinedRoot | None = None
        if workspace is not None:
            self._default_directory = workspace.directory
            self._confinement = ConfinedRoot(workspace.directory)
        else:
            self._default_directory = self._work_root or os.getcwd()
        self._inherit_environment = inherit_environment
        self._kill_grace = kill_grace_seconds
        self._drain = drain_seconds
        self._shell = shell or default_shell()
        self._processes = ProcessRegistry()
        self._file_system_impl = LocalFileSystem(
            self._default_directory, root=workspace.directory if workspace else None
        )
        self._root_ready = workspace is None and self._work_root is None
        self._root_lock = threading.Lock()
        self._guard, self._owned_store = workspace_guard(
            self.name,
            workspace,
            conversation_store,
            service_key=local_service_key(workspace.conversations_root) if workspace else "",
            exclusive=exclusive,
            lease_ttl_seconds=lease_ttl_seconds,
            lease_wait_seconds=lease_wait_seconds,
            activity_interval_seconds=activity_interval_seconds,
        )

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return "local"

    @property
    def default_working_directory(self) -> str:
        return self._default_directory

    @property
    def shell(self) -> str:
        """The shell commands run with (``<shell> -c <command>``)."""
        return self._shell

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self._ensure_open()
        self._ensure_root()
        return super().execute(request)

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        self._ensure_root()
        return super().prepare(request)

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        self._ensure_root()
        return super().get_file_system()

    # ----------------------------------------------------------------- hooks

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        cwd = os.path.join(self._default_directory, working_directory)
        directory_fd = self._open_working_directory(cwd)
        try:
            return run_command(
                [self._shell, "-c", request.command],
                cwd=cwd if directory_fd is None else f"/proc/self/fd/{directory_fd}",
                env=self._process_environment(environment),
                timeout=request.timeout_seconds,
                max_output_bytes=request.max_output_bytes,
                kill_grace=self._kill_grace,
                drain_seconds=self._drain,
                registry=self._processes,
            )
        finally:
            if directory_fd is not None:
                os.close(directory_fd)

    def _open_working_directory(self, cwd: str) -> int | None:
        """In a workspace, open ``cwd`` race-free and return its descriptor, which the command
        enters through ``/proc/self/fd`` (the child inherits it until ``exec``). ``None`` outside
        a workspace or where ``/proc`` is missing (then the checked path is used)."""
        if self._confinement is None:
            return None
        fd = self._open_confined_directory(self._confinement, cwd)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            return fd
        os.close(fd)
        return None

    def _process_environment(self, environment: dict[str, str]) -> dict[str, str] | None:
        """The exact environment of a command (``None``: this process's own, unchanged)."""
        if self._inherit_environment:
            return None if not environment else {**os.environ, **environment}
        return dict(environment)

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self._file_system_impl

    def _close_resources(self) -> None:
        stopped = self._processes.close()
        if stopped:
            logger.info("killed %d running command(s) of the closed local runtime", stopped)
        if self._owned_store is not None:
            self._owned_store.close()

    def _skills_root(self) -> str | None:
        if self._work_root is not None:  # never combined with a workspace
            return os.path.join(self._work_root, "skills")
        return super()._skills_root()

    @staticmethod
    def _open_confined_directory(confinement: ConfinedRoot, cwd: str) -> int:
        """Open the directory ``cwd`` race-free (walked again when it turns into a link between
        the walk and the open)."""
        failure: BaseException | None = None
        for _ in range(MAX_SYMLINK_HOPS):
            try:
                with confinement.locate(cwd, follow_final=True) as located:
                    return open_directory_below(located.dir_fd, [located.name])
            except (OSError, RuntimeFileError) as exc:
                if isinstance(exc, WorkspaceEscapeError | InvalidPathError):
                    raise
                failure = exc
                if not (isinstance(exc, OSError) and exc.errno in (errno.ENOTDIR, errno.ELOOP)):
                    break
        raise ExecutionTransportError(
            f"Working directory does not exist or is not a directory: {cwd}"
        ) from failure

    def _is_ready(self, target: str) -> bool:
        """A copy reached through a link out of the workspace is never ready (placing it then
        fails with the reason)."""
        try:
            return super()._is_ready(target)
        except WorkspaceEscapeError:
            return False

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Copy into a staging sibling of ``target``, then rename it into place.

        In a workspace the parent is created and entered through a descriptor of the confined
        walk, so a link swapped in meanwhile cannot carry the copy out. A failure leaves neither
        a half-copied ``target`` nor the staging directory.
        """
        parent, name = os.path.split(target)
        if self._confinement is None:
            os.makedirs(parent, exist_ok=True)
            self._copy_into(parent, name, target, files)
            return
        self._file_system_impl.make_directory(parent)
        with self._confinement.locate(parent, follow_final=True) as located:
            parent_fd = open_directory_below(located.dir_fd, [located.name])
        try:
            through_fd = f"/proc/self/fd/{parent_fd}"
            directory = through_fd if os.path.isdir(through_fd) else parent
            self._copy_into(directory, name, target, files)
        finally:
            os.close(parent_fd)

    def _copy_into(
        self, directory: str, name: str, target: str, files: Sequence[SkillFile]
    ) -> None:
        staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=".partial", dir=directory)
        try:
            os.chmod(staging, 0o755)  # noqa: S103 - a skill copy is world-readable like its source
            copy_skill_files(files, Path(staging))
            placed = os.path.join(directory, name)
            if os.path.lexists(placed):  # an incomplete copy left by an earlier failure
                self._file_system_impl.delete(target)
            os.rename(staging, placed)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    # -------------------------------------------------------------- helpers

    def _ensure_root(self) -> None:
        """Create the workspace or work root on first use."""
        if self._root_ready:
            return
        with self._root_lock:
            if not self._root_ready:
                os.makedirs(self._default_directory, exist_ok=True)
                self._root_ready = True


def _workspace_for(
    conversation_id: str | None,
    conversations_root: str | os.PathLike[str] | None,
    work_root: str | os.PathLike[str] | None,
) -> ConversationWorkspace | None:
    if conversation_id is None:
        if conversations_root is not None:
            raise ValueError("conversations_root needs a conversation_id")
        return None
    if work_root is not None:
        raise ValueError(
            "work_root cannot be combined with conversation_id (the conversation workspace is "
            "the work root)"
        )
    root = _absolute(
        conversations_root if conversations_root is not None else DEFAULT_CONVERSATIONS_ROOT
    )
    return ConversationWorkspace(root, conversation_id)
