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

import logging
import os
from collections.abc import Mapping, Sequence

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
from skillruntime.core.durability.automatic import Durability, DurableWorkspace
from skillruntime.core.errors import WorkspaceEscapeError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.rules import ScannedSkill
from skillruntime.core.runtime.spi import BaseSkillRuntime
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .layout import (
    DEFAULT_CONVERSATIONS_ROOT,
    LocalLayout,
    conversation_workspace,
    default_shell,
    shell_argv,
)
from .process import (
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_KILL_GRACE_SECONDS,
    ProcessRegistry,
    check_stop_seconds,
    run_command,
)

__all__ = ["DEFAULT_CONVERSATIONS_ROOT", "LocalSkillRuntime", "default_shell", "shell_argv"]

logger = logging.getLogger(__name__)


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

    The workspace, confinement, command environment and skill copies are those of
    :attr:`layout` (a :class:`~skillruntime.local.layout.LocalLayout`, shared with
    :class:`~skillruntime.local.AsyncLocalSkillRuntime`); this class runs the commands.
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
        durability: Durability | None = None,
    ) -> None:
        workspace = conversation_workspace(conversation_id, conversations_root, work_root)
        if durability is not None and workspace is None:
            raise ValueError("durability needs a conversation_id")
        super().__init__(
            base_environment=base_environment, workspace=workspace, upload_policy=upload_policy
        )
        check_stop_seconds(kill_grace_seconds, drain_seconds)
        self._layout = LocalLayout(
            workspace=workspace,
            work_root=work_root,
            inherit_environment=inherit_environment,
            upload_policy=upload_policy,
            shell=shell,
        )
        self._kill_grace = kill_grace_seconds
        self._drain = drain_seconds
        self._processes = ProcessRegistry()
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
        self._durable: DurableWorkspace | None = None
        if durability is not None and workspace is not None:
            guard = self._guard
            self._durable = DurableWorkspace(
                durability,
                conversation_id=workspace.conversation_id,
                binding=None,
                lease=(guard.store, guard.storage_key) if guard is not None else None,
            )
            self._durable.attached(None)  # the first operation checks the workspace

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return "local"

    @property
    def layout(self) -> LocalLayout:
        """The host layout: mode, workspace, confinement, environment, skill copies."""
        return self._layout

    @property
    def default_working_directory(self) -> str:
        return self._layout.default_working_directory

    @property
    def shell(self) -> str:
        """The shell commands run with (``<shell> -c -- <command>``, :func:`shell_argv`)."""
        return self._layout.shell

    def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self._ensure_open()
        self._layout.ensure_root()
        if self._durable is not None:
            self._durable.before(self)
        return super().execute(request)

    def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        self._layout.ensure_root()
        if self._durable is not None:
            self._durable.before(self)
        return super().prepare(request)

    def get_file_system(self) -> SkillRuntimeFileSystem:
        self._ensure_open()
        self._layout.ensure_root()
        if self._durable is not None:
            self._durable.before(self)
        return super().get_file_system()

    # ----------------------------------------------------------------- hooks

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        layout = self._layout
        cwd = os.path.join(layout.default_working_directory, working_directory)
        directory_fd = layout.open_working_directory(cwd)
        try:
            return run_command(
                layout.command_argv(request.command),
                cwd=cwd if directory_fd is None else f"/proc/self/fd/{directory_fd}",
                env=layout.process_environment(environment),
                timeout=request.timeout_seconds,
                max_output_bytes=request.max_output_bytes,
                kill_grace=self._kill_grace,
                drain_seconds=self._drain,
                registry=self._processes,
            )
        finally:
            if directory_fd is not None:
                os.close(directory_fd)

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self._layout.file_system

    @property
    def durable_workspace(self) -> DurableWorkspace | None:
        """The automatic snapshots and restores of this runtime (``None`` without
        ``durability``; docs/durability.md)."""
        return self._durable

    def close(self) -> None:
        """Snapshot a used conversation when ``durability`` asks for it, then close."""
        if self._durable is not None and not self._closed:
            self._durable.closing(self)
        super().close()

    def _close_resources(self) -> None:
        stopped = self._processes.close()
        if stopped:
            logger.info("killed %d running command(s) of the closed local runtime", stopped)
        if self._owned_store is not None:
            self._owned_store.close()

    def _skills_root(self) -> str | None:
        return self._layout.skills_directory

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
            self._layout.discard_staged()

    def _scan_skill(self, skill: Skill) -> ScannedSkill:
        """Walk the skill; on a cold prepare also copy it, hashing while copying
        (:meth:`LocalLayout.scan_skill <skillruntime.local.layout.LocalLayout.scan_skill>`)."""
        return self._layout.scan_skill(skill, runtime_name=self.name)

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Copy into a staging sibling of ``target`` and rename it into place
        (:meth:`LocalLayout.place_skill <skillruntime.local.layout.LocalLayout.place_skill>`)."""
        self._layout.place_skill(skill, files, target)
