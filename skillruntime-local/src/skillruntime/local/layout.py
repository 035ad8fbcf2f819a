"""``LocalLayout``: where and how the local runtimes work on this host, shared by both faces.

:class:`~skillruntime.local.LocalSkillRuntime` (sync) and
:class:`~skillruntime.local.AsyncLocalSkillRuntime` (asyncio) are thin faces over one
:class:`LocalLayout` each, in the manner of a shared connection core with a sync and an async
face: the layout owns what does not depend on how a command is awaited, and both faces use only
its public members.

* the **mode** and its directories: the conversation workspace (:func:`conversation_workspace`),
  the work root, the default working directory, created on first use
  (:meth:`LocalLayout.ensure_root`);
* the **confinement** of a workspace: the race-free resolution of paths
  (:class:`~skillruntime.local.confinement.ConfinedRoot`), the confined
  :class:`~skillruntime.local.filesystem.LocalFileSystem`, and the working directory of a
  command opened through a descriptor (:meth:`LocalLayout.open_working_directory`);
* the **environment** and argv of a command (:meth:`LocalLayout.process_environment`,
  :meth:`LocalLayout.command_argv`);
* the **placing of skills**: the skills directory, the one-pass copy that hashes while copying
  (:meth:`LocalLayout.scan_skill`) and the copy renamed into place
  (:meth:`LocalLayout.place_skill`).

Running commands, the process registry, conversation leases and closing stay in the faces.
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

from skillruntime.core.errors import (
    ExecutionTransportError,
    InvalidPathError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
    SkillPrepareError,
    WorkspaceEscapeError,
    printable,
)
from skillruntime.core.models import Skill
from skillruntime.core.runtime.rules import ScannedSkill, place_failure, scan_skill
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
from .staging import copy_and_hash

__all__ = [
    "DEFAULT_CONVERSATIONS_ROOT",
    "LocalLayout",
    "conversation_workspace",
    "default_shell",
    "shell_argv",
]

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


def conversation_workspace(
    conversation_id: str | None,
    conversations_root: str | os.PathLike[str] | None,
    work_root: str | os.PathLike[str] | None,
) -> ConversationWorkspace | None:
    """The workspace of the local runtimes' constructor arguments, ``None`` without a
    conversation.

    Raises :class:`ValueError` for ``conversations_root`` without ``conversation_id``, for
    ``work_root`` with ``conversation_id``, and for a relative ``conversations_root`` (``~`` is
    expanded; the default is :data:`DEFAULT_CONVERSATIONS_ROOT`).
    """
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


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


class LocalLayout:
    """The host side of one local runtime: mode, workspace, confinement, environment and the
    placing of skills (see the module docs). Thread-safe; a runtime builds one and keeps it.

    ``workspace`` (from :func:`conversation_workspace`) selects the conversation mode, else
    ``work_root`` the work-root mode (the two are exclusive), else skills are used in place and
    the default working directory is this process's working directory now. ``inherit_environment``
    says whether commands start from this process's environment; ``shell`` overrides the shell
    (default: :func:`default_shell`); ``upload_policy`` selects the files of a skill copy.
    """

    def __init__(
        self,
        *,
        workspace: ConversationWorkspace | None = None,
        work_root: str | os.PathLike[str] | None = None,
        inherit_environment: bool = True,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        shell: str | None = None,
    ) -> None:
        if workspace is not None and work_root is not None:
            raise ValueError(
                "work_root cannot be combined with conversation_id (the conversation workspace "
                "is the work root)"
            )
        self._workspace = workspace
        self._work_root = _absolute(work_root) if work_root is not None else None
        self._confinement: ConfinedRoot | None = None
        if workspace is not None:
            self._default_directory = workspace.directory
            self._confinement = ConfinedRoot(workspace.directory)
        else:
            self._default_directory = self._work_root or os.getcwd()
        self._inherit_environment = inherit_environment
        self._upload_policy = upload_policy
        self._shell = shell or default_shell()
        self._proc_fd_paths: bool | None = None  # whether /proc/self/fd/N reaches a directory
        self._file_system = LocalFileSystem(
            self._default_directory, root=workspace.directory if workspace else None
        )
        self._root_ready = workspace is None and self._work_root is None
        self._root_lock = threading.Lock()
        self._staged = threading.local()  # the one-pass copy of the prepare on this thread

    # ------------------------------------------------------------ directories

    @property
    def workspace(self) -> ConversationWorkspace | None:
        """The conversation workspace, ``None`` outside the conversation mode."""
        return self._workspace

    @property
    def work_root(self) -> str | None:
        """The absolute work root, ``None`` outside the work-root mode."""
        return self._work_root

    @property
    def default_working_directory(self) -> str:
        """The workspace, else the work root, else the process's working directory at build."""
        return self._default_directory

    @property
    def skills_directory(self) -> str | None:
        """The directory receiving prepared copies (``<work root>/skills`` or the workspace's),
        ``None`` when skills are used in place."""
        if self._work_root is not None:  # never combined with a workspace
            return os.path.join(self._work_root, "skills")
        return self._workspace.skills_directory if self._workspace else None

    def ensure_root(self) -> None:
        """Create the workspace or work root on first use (once; later calls cost a read)."""
        if self._root_ready:
            return
        with self._root_lock:
            if not self._root_ready:
                os.makedirs(self._default_directory, exist_ok=True)
                self._root_ready = True

    # ------------------------------------------------------------ confinement

    @property
    def confinement(self) -> ConfinedRoot | None:
        """The race-free resolver below the workspace, ``None`` outside a workspace."""
        return self._confinement

    @property
    def file_system(self) -> LocalFileSystem:
        """The unscoped host file system (confined to the workspace in the conversation mode)."""
        return self._file_system

    def open_working_directory(self, cwd: str) -> int | None:
        """In a workspace, open ``cwd`` race-free and return its descriptor, which the command
        enters through ``/proc/self/fd`` (the child inherits it until ``exec``; the caller
        closes it). ``None`` outside a workspace or where ``/proc`` is missing (then the checked
        path is used).

        Raises :class:`WorkspaceEscapeError` or :class:`InvalidPathError` for a path that leaves
        the workspace, :class:`ExecutionTransportError` for a missing directory."""
        if self._confinement is None:
            return None
        fd = self._open_confined_directory(self._confinement, cwd)  # the check, even without /proc
        if self._proc_fd_paths is None:  # learnt once: /proc does not come and go
            self._proc_fd_paths = os.path.isdir(f"/proc/self/fd/{fd}")
        if self._proc_fd_paths:
            return fd
        os.close(fd)
        return None

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
            f"Working directory does not exist or is not a directory: {printable(cwd)}"
        ) from failure

    # ------------------------------------------------------------ environment

    @property
    def shell(self) -> str:
        """The shell commands run with (``<shell> -c -- <command>``, :func:`shell_argv`)."""
        return self._shell

    @property
    def inherit_environment(self) -> bool:
        """Whether commands start from this process's environment."""
        return self._inherit_environment

    def command_argv(self, command: str) -> list[str]:
        """The argv running ``command`` with :attr:`shell`."""
        return shell_argv(self._shell, command)

    def process_environment(self, environment: Mapping[str, str]) -> dict[str, str] | None:
        """The exact environment of a command given its overlay (``None``: this process's own,
        unchanged)."""
        if self._inherit_environment:
            return None if not environment else {**os.environ, **environment}
        return dict(environment)

    # ------------------------------------------------------------ placing skills

    def scan_skill(self, skill: Skill, *, runtime_name: str) -> ScannedSkill:
        """Walk and digest ``skill``; on a cold prepare also copy it, hashing while copying.

        When the skill goes to a skills directory, no file hash is memoised and no prepared
        copy of a skill of this name is there yet (so the copy will very likely be needed), the
        files are copied into a staging directory beside the prepared copies in the same pass
        that hashes them (:func:`~skillruntime.local.staging.copy_and_hash`); :meth:`place_skill`
        on the same thread then only renames the staging directory, and :meth:`discard_staged`
        removes it when the prepare did not need it. Otherwise the digest comes from the hashes
        (memoised ones cost nothing) and the copy, if needed, is made afterwards. Raises what
        :func:`~skillruntime.core.runtime.rules.scan_skill` raises, and a placing failure named
        after ``runtime_name`` when staging fails.
        """
        skills_root = self.skills_directory
        if skills_root is None:
            return scan_skill(skill, self._upload_policy)
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
                return scan_skill(skill, self._upload_policy)
            digest = self._stage(skills_root, skill, files)
        except Exception as exc:
            failure = place_failure(skill, runtime_name, exc)
            if failure is exc:
                raise
            raise failure from exc
        return ScannedSkill(source, files, digest)

    def place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Copy ``files`` into a staging sibling of ``target``, then rename it into place (a
        staging directory filled by :meth:`scan_skill` on this thread is only renamed).

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

    def discard_staged(self) -> None:
        """Remove this thread's staging directory if the prepare did not use it."""
        entry: tuple[str, str, str] | None = getattr(self._staged, "entry", None)
        if entry is None:
            return
        self._staged.entry = None
        skills_root, staging_name, _ = entry
        try:
            self._file_system.delete(os.path.join(skills_root, staging_name))
        except (OSError, RuntimeFileError) as exc:
            logger.warning("could not remove the staging copy %s: %s", staging_name, exc)

    def _has_prepared_copy(self, skills_root: str, skill_name: str) -> bool:
        """True when ``skills_root`` holds a prepared copy (any digest) of a skill named so."""
        prefix = prepared_directory_name(skill_name, "")  # "<safe-name>-"
        try:
            entries = self._file_system.list_directory(skills_root)
        except RuntimeFileNotFoundError:
            return False
        return any(os.path.basename(entry.path).startswith(prefix) for entry in entries)

    def _stage(self, skills_root: str, skill: Skill, files: Sequence[SkillFile]) -> str:
        """Copy ``files`` into a new staging directory of ``skills_root`` while hashing them;
        remember it for :meth:`place_skill` and return the skill's digest."""
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
        self._file_system.make_directory(directory)
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

    def _rename_into_place(self, staging: str, directory: str, name: str, target: str) -> None:
        placed = os.path.join(directory, name)
        if os.path.lexists(placed):  # an incomplete copy left by an earlier failure
            self._file_system.delete(target)
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
