"""``LocalSkillRuntime``: skill commands and files on the host. Not a sandbox.

Three modes, chosen by the constructor arguments:

* **Conversation** (``conversation_id``): the workspace is ``<conversations_root>/<id>``
  (``conversations_root``, an absolute path or one starting with ``~``, defaults to
  :data:`DEFAULT_CONVERSATIONS_ROOT`; a relative root raises :class:`ValueError`). It is created
  on first use, is the default working directory, and scopes every file operation and working
  directory; symbolic links are resolved, so a link cannot carry an operation out of it.
  Resolution is race-free: paths are walked through directory descriptors of the workspace, and
  a command's working directory is entered through the descriptor the check opened, so a
  directory swapped for a link meanwhile changes nothing. Skills are copied to
  ``<workspace>/skills/<name>-<digest12>/``.
* **Work root** (``work_root``, no conversation): skills are copied to
  ``<work_root>/skills/<name>-<digest12>/``; the work root is the default working directory.
  Paths are not confined.
* **In place** (neither): skills are used where they are (bootstrap commands run in, and may
  write to, the source directory); the default working directory is the process's working
  directory when the runtime was built. Paths are not confined.

Relative paths and working directories resolve against the default working directory. A missing
working directory raises :class:`ExecutionTransportError` (the command could not be started).
:meth:`close` deletes no workspace and no prepared copy; it kills the process trees of commands
still running in other threads, whose ``execute`` then raises :class:`RuntimeClosedError`.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ExclusiveRuntimeMixin,
    local_service_key,
    workspace_guard,
)
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.errors import (
    ExecutionTransportError,
    InvalidPathError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    SkillPrepareError,
    WorkspaceEscapeError,
)
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.rules import ScannedSkill, place_failure
from skillruntime.core.runtime.spi import BaseSkillRuntime
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.skills.files import (
    DEFAULT_UPLOAD_POLICY,
    SkillFile,
    UploadPolicy,
    copy_skill_files,
    digest_from_hashes,
    iter_skill_files,
    known_file_hash,
    prepared_directory_name,
    skill_digest,
)

from .confinement import MAX_SYMLINK_HOPS, ConfinedRoot, open_directory_below
from .filesystem import LocalFileSystem
from .process import (
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_KILL_GRACE_SECONDS,
    ProcessRegistry,
    run_command,
)
from .staging import copy_and_hash

__all__ = ["DEFAULT_CONVERSATIONS_ROOT", "LocalSkillRuntime", "default_shell", "shell_argv"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

DEFAULT_CONVERSATIONS_ROOT = Path("~/.skillruntime/conversations")
"""Root of conversation workspaces when a conversation id is given without a root (expanded)."""


def default_shell() -> str:
    """Absolute path of ``bash``, or of ``sh`` where bash is missing."""
    return shutil.which("bash") or shutil.which("sh") or "/bin/sh"


def shell_argv(shell: str, command: str) -> list[str]:
    """The argv that runs ``command`` with ``shell``: ``<shell> -c -- <command>``.

    The ``--`` ends the shell's options, so a command that starts with ``-`` (``--version``,
    ``-x``) is run as a command instead of being read as options of the shell; bash, dash and the
    other POSIX shells all take it.
    """
    return [shell, "-c", "--", command]


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
    workspace take turns (see :mod:`skillruntime.core.conversations.exclusive`).
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
        self._proc_fd_paths: bool | None = None  # whether /proc/self/fd/N reaches a directory
        self._file_system_impl = LocalFileSystem(
            self._default_directory, root=workspace.directory if workspace else None
        )
        self._root_ready = workspace is None and self._work_root is None
        self._root_lock = threading.Lock()
        self._staged = threading.local()  # the one-pass copy of the prepare on this thread
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
        """The shell commands run with (``<shell> -c -- <command>``, :func:`shell_argv`)."""
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
                shell_argv(self._shell, request.command),
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
        fd = self._open_confined_directory(self._confinement, cwd)  # the check, even without /proc
        if self._proc_fd_paths is None:  # learnt once: /proc does not come and go
            self._proc_fd_paths = os.path.isdir(f"/proc/self/fd/{fd}")
        if self._proc_fd_paths:
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

    def _prepare_one(self, skill: Skill, config: SkillRuntimeConfig) -> Skill:
        try:
            return super()._prepare_one(skill, config)
        finally:
            self._discard_staged()

    def _scan_skill(self, skill: Skill) -> ScannedSkill:
        """Walk the skill; on a cold prepare also copy it, hashing while copying.

        When the skill goes to a skills directory, no file hash is memoised and no prepared
        copy of a skill of this name is there yet (so the copy will very likely be needed), the
        files are copied into a staging directory beside the prepared copies in the same pass
        that hashes them (:func:`~skillruntime.local.staging.copy_and_hash`); placing the
        skill then only renames the staging directory. Otherwise the digest comes from the
        hashes (memoised ones cost nothing) and the copy, if needed, is made afterwards.
        """
        skills_root = self._skills_root()
        if skills_root is None:
            return super()._scan_skill(skill)
        source = Path(skill.base_path)
        try:
            files = sorted(
                iter_skill_files(source, self._upload_policy), key=lambda item: item.relative_path
            )
            if all(known_file_hash(item) is not None for item in files):
                return ScannedSkill(source, files, skill_digest(files))
        except OSError as exc:
            raise SkillPrepareError(
                f"Cannot read skill '{skill.name}' at {source}: {exc.strerror or exc}",
                skill_name=skill.name,
            ) from exc
        try:
            if self._has_prepared_copy(skills_root, skill.name):
                return super()._scan_skill(skill)
            digest = self._stage(skills_root, skill, files)
        except Exception as exc:
            failure = place_failure(skill, self.name, exc)
            if failure is exc:
                raise
            raise failure from exc
        return ScannedSkill(source, files, digest)

    def _has_prepared_copy(self, skills_root: str, skill_name: str) -> bool:
        """True when ``skills_root`` holds a prepared copy (any digest) of a skill named so."""
        prefix = prepared_directory_name(skill_name, "")  # "<safe-name>-"
        try:
            entries = self._file_system_impl.list_directory(skills_root)
        except RuntimeFileNotFoundError:
            return False
        return any(os.path.basename(entry.path).startswith(prefix) for entry in entries)

    def _stage(self, skills_root: str, skill: Skill, files: Sequence[SkillFile]) -> str:
        """Copy ``files`` into a new staging directory of ``skills_root`` while hashing them;
        remember it for :meth:`_place_skill` and return the skill's digest."""
        prefix = "." + prepared_directory_name(skill.name, "")

        def stage(directory: str) -> tuple[str, str]:
            staging = tempfile.mkdtemp(prefix=prefix, suffix=".partial", dir=directory)
            try:
                os.chmod(staging, 0o755)  # noqa: S103 - a skill copy is world-readable like its source
                hashes = copy_and_hash(files, Path(staging))
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            return digest_from_hashes(files, hashes), os.path.basename(staging)

        digest, staging_name = self._in_directory(skills_root, stage)
        self._staged.entry = (skills_root, staging_name, prepared_directory_name(skill.name, ""))
        return digest

    def _in_directory(self, directory: str, action: Callable[[str], T]) -> T:
        """Create ``directory`` and run ``action`` on a path naming it. In a workspace the path
        goes through a descriptor of the confined walk (``/proc/self/fd/N``), so a link swapped
        in meanwhile cannot carry ``action`` out."""
        if self._confinement is None:
            os.makedirs(directory, exist_ok=True)
            return action(directory)
        self._file_system_impl.make_directory(directory)
        with self._confinement.locate(directory, follow_final=True) as located:
            directory_fd = open_directory_below(located.dir_fd, [located.name])
        try:
            through_fd = f"/proc/self/fd/{directory_fd}"
            return action(through_fd if os.path.isdir(through_fd) else directory)
        finally:
            os.close(directory_fd)

    def _take_staged(self, target: str) -> str | None:
        """The staging directory name of this thread's prepare when ``target`` is a copy of the
        staged skill in the staged skills directory. (The copy's name digest also covers the
        bootstrap commands, which the staged files do not depend on.)"""
        entry: tuple[str, str, str] | None = getattr(self._staged, "entry", None)
        if entry is None:
            return None
        skills_root, staging_name, prefix = entry
        name = os.path.basename(target)
        if os.path.join(skills_root, name) != target or not (
            name.startswith(prefix) and len(name) == len(prefix) + 12
        ):
            return None
        self._staged.entry = None
        return staging_name

    def _discard_staged(self) -> None:
        """Remove this thread's staging directory if the prepare did not use it."""
        entry: tuple[str, str, str] | None = getattr(self._staged, "entry", None)
        if entry is None:
            return
        self._staged.entry = None
        skills_root, staging_name, _ = entry
        try:
            self._file_system_impl.delete(os.path.join(skills_root, staging_name))
        except (OSError, RuntimeFileError) as exc:
            logger.warning("could not remove the staging copy %s: %s", staging_name, exc)

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Copy into a staging sibling of ``target``, then rename it into place (a staging
        directory filled while hashing, see :meth:`_scan_skill`, is only renamed).

        In a workspace the parent is created and entered through a descriptor of the confined
        walk, so a link swapped in meanwhile cannot carry the copy out. A failure leaves neither
        a half-copied ``target`` nor the staging directory.
        """
        parent, name = os.path.split(target)
        staged = self._take_staged(target)

        def place(directory: str) -> None:
            if staged is not None:
                staging = os.path.join(directory, staged)
                try:
                    self._rename_into_place(staging, directory, name, target)
                    return
                except FileNotFoundError:
                    pass  # the directory was swapped meanwhile: copy again below
                except BaseException:
                    shutil.rmtree(staging, ignore_errors=True)
                    raise
            self._copy_into(directory, name, target, files)

        self._in_directory(parent, place)

    def _rename_into_place(self, staging: str, directory: str, name: str, target: str) -> None:
        placed = os.path.join(directory, name)
        if os.path.lexists(placed):  # an incomplete copy left by an earlier failure
            self._file_system_impl.delete(target)
        os.rename(staging, placed)

    def _copy_into(
        self, directory: str, name: str, target: str, files: Sequence[SkillFile]
    ) -> None:
        staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=".partial", dir=directory)
        try:
            os.chmod(staging, 0o755)  # noqa: S103 - a skill copy is world-readable like its source
            copy_skill_files(files, Path(staging))
            self._rename_into_place(staging, directory, name, target)
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
    given = conversations_root if conversations_root is not None else DEFAULT_CONVERSATIONS_ROOT
    root = os.path.expanduser(os.fspath(given))
    if not os.path.isabs(root):
        # as in every runtime: a relative root would name another directory from another cwd
        raise ValueError(
            f"conversations_root must be an absolute path (got {os.fspath(given)!r}); "
            "resolve it first, e.g. Path(root).resolve()"
        )
    return ConversationWorkspace(root, conversation_id)
