"""``AsyncLocalSkillRuntime``: the local runtime for asyncio programs. Not a sandbox.

Same constructor, modes, paths and rules as :class:`~skillruntime.local.LocalSkillRuntime`: both
are faces over a :class:`~skillruntime.local.layout.LocalLayout` (mode, workspace, race-free
confinement, command environment, skill copies), whose public members they use. Commands run
natively on the event loop (:func:`~skillruntime.local.async_process.run_command_async`): no
thread per command, process-tree kill on timeout, on cancellation of the awaiting task (including
:func:`asyncio.timeout`) and on :meth:`close`, after which the runtime raises
``RuntimeClosedError``; a cancelled command leaves the runtime usable.

File operations and skill copies are host file I/O, which asyncio cannot do natively: they run in
the event loop's default executor (a handful of threads), one call per operation.

``conversation_store`` and ``exclusive=True`` work as in the sync runtime, with the lease kept by
asyncio (:mod:`skillruntime.core.conversations.async_exclusive`): waiting for the lease sleeps on
the loop, the renewer is a task, store calls run in worker threads. Sync and async runtimes sharing
the workspace take turns with each other.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence

from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.async_exclusive import (
    AsyncConversationGuard,
    AsyncExclusiveRuntimeMixin,
)
from skillruntime.core.conversations.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    local_service_key,
    workspace_guard,
)
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.durability.automatic import AsyncDurableWorkspace, Durability
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.async_spi import AsyncBaseSkillRuntime
from skillruntime.core.runtime.bridge import ThreadedAsyncFileSystem
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .async_process import run_command_async
from .layout import LocalLayout, conversation_workspace
from .process import (
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_KILL_GRACE_SECONDS,
    ProcessRegistry,
    check_stop_seconds,
)

__all__ = ["AsyncLocalSkillRuntime"]

logger = logging.getLogger(__name__)


class AsyncLocalSkillRuntime(AsyncExclusiveRuntimeMixin, AsyncBaseSkillRuntime):
    """Runs skill commands with ``bash -c`` on this host from asyncio; arguments as
    :class:`~skillruntime.local.LocalSkillRuntime`."""

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
        self._files = ThreadedAsyncFileSystem(self._layout.file_system)
        self._guard, self._owned_store = workspace_guard(
            self.name,
            workspace,
            conversation_store,
            service_key=local_service_key(workspace.conversations_root) if workspace else "",
            exclusive=exclusive,
            lease_ttl_seconds=lease_ttl_seconds,
            lease_wait_seconds=lease_wait_seconds,
            activity_interval_seconds=activity_interval_seconds,
            guard_type=AsyncConversationGuard,
        )
        self._durable: AsyncDurableWorkspace | None = None
        if durability is not None and workspace is not None:
            guard = self._guard
            self._durable = AsyncDurableWorkspace(
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
        """The shell commands run with (``<shell> -c -- <command>``)."""
        return self._layout.shell

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self._ensure_open()
        self._layout.ensure_root()
        if self._durable is not None:
            await self._durable.before(self)
        return await super().execute(request)

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        self._layout.ensure_root()
        if self._durable is not None:
            await self._durable.before(self)
        return await super().prepare(request)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        self._ensure_open()
        self._layout.ensure_root()
        if self._durable is not None:
            await self._durable.before(self)
        return await super().get_file_system()

    # ----------------------------------------------------------------- hooks

    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        layout = self._layout
        cwd = os.path.join(layout.default_working_directory, working_directory)
        # Entered through the race-free descriptor of the layout's confinement, as in the sync face.
        directory_fd = layout.open_working_directory(cwd)
        try:
            return await run_command_async(
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

    def _raw_file_system(self) -> AsyncSkillRuntimeFileSystem:
        return self._files

    @property
    def durable_workspace(self) -> AsyncDurableWorkspace | None:
        """The automatic snapshots and restores of this runtime (``None`` without
        ``durability``; docs/durability.md)."""
        return self._durable

    async def close(self) -> None:
        """Snapshot a used conversation when ``durability`` asks for it, then close."""
        if self._durable is not None and not self._closed:
            await self._durable.closing(self)
        await super().close()

    async def _close_resources(self) -> None:
        stopped = self._processes.close()
        if stopped:
            logger.info("killed %d running command(s) of the closed local runtime", stopped)
        if self._owned_store is not None:
            await asyncio.to_thread(self._owned_store.close)

    def _skills_root(self) -> str | None:
        return self._layout.skills_directory

    async def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        await asyncio.to_thread(self._layout.place_skill, skill, files, target)
