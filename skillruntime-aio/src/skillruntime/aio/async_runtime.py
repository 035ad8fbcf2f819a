"""``AsyncAioSkillRuntime``: the AIO Sandbox runtime for asyncio programs, native on ``httpx``.

Same constructor, modes, layout and rules as :class:`~skillruntime.aio.AioSandboxSkillRuntime`
(conversation workspace or shared root, ready markers on the service's disk, one archive per
skill), and the same wire calls: the command flows, wrapper, request building and answer parsing
are the sync runtime's own (:mod:`.commands`, :mod:`.wire`, :mod:`.files`), performed with
:class:`~skillruntime.aio.async_client.AsyncAioClient` — one connection pool, no thread per call.

**Cancellation.** Every command carries a unique
:data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE` in its environment. When the task
awaiting :meth:`execute` is cancelled (``task.cancel()`` or :func:`asyncio.timeout`), the runtime
retires the command's session on the service, then runs the kill sweep of
:func:`~skillruntime.core.runtime.bridge.kill_marked_command` as one more command, which sends
``SIGKILL`` to every process holding the marker (the whole tree the command started), and only then
lets the cancellation propagate. The runtime stays usable.

:meth:`close` kills the commands still running (the same sweep; their :meth:`execute` raises
``RuntimeClosedError``), then closes the command sessions this runtime opened and its HTTP
connections; it deletes no workspace and no prepared copy.

**Any event loop.** One runtime object serves consecutive event loops (``asyncio.run`` per
call): the client keeps a connection pool per loop and the runtime's locks are per loop.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
import uuid
from collections.abc import Mapping, Sequence

from skillruntime.core.conversations import ConversationStore, service_key_for_url
from skillruntime.core.conversations.async_exclusive import (
    AsyncConversationGuard,
    AsyncExclusiveRuntimeMixin,
)
from skillruntime.core.conversations.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    workspace_guard,
)
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.errors import ExecutionTransportError
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.async_spi import AsyncBaseSkillRuntime, LoopLocal
from skillruntime.core.runtime.bridge import CANCEL_MARKER_VARIABLE, kill_marked_command
from skillruntime.core.runtime.rules import closed_error
from skillruntime.core.runtime.spi import ready_marker_path
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .archive import build_skill_archive, unpack_command
from .async_client import AsyncAioClient
from .async_commands import AsyncCommandRunner
from .async_files import AsyncAioFileSystem
from .client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .commands import CommandMode, CommandSpec
from .errors import AioSandboxError
from .first_use import FirstUse
from .options import DEFAULT_CONVERSATIONS_ROOT, DEFAULT_REMOTE_ROOT, validate_base_url
from .runtime import (
    checked_remote_root,
    command_cwd,
    execution_result,
    unpack_error,
    unpack_failure,
    unpack_spec,
    upload_failure,
)

__all__ = ["AsyncAioSkillRuntime"]

logger = logging.getLogger(__name__)

_KILL_TIMEOUT = 30.0
"""Seconds the kill sweep of a cancelled command may take."""


class AsyncAioSkillRuntime(AsyncExclusiveRuntimeMixin, AsyncBaseSkillRuntime):
    """Runs skills in an existing AIO Sandbox service from asyncio; arguments as
    :class:`~skillruntime.aio.AioSandboxSkillRuntime` (``client`` is an
    :class:`~skillruntime.aio.async_client.AsyncAioClient`; its owner closes it).

    ``conversation_store`` and ``exclusive=True`` as in the sync runtime, with the lease kept by
    asyncio (:mod:`skillruntime.core.conversations.async_exclusive`); sync and async runtimes of one
    conversation take turns with each other.
    """

    def __init__(
        self,
        *,
        base_url: str,
        token: str | None = None,
        api_key: str | None = None,
        conversation_id: str | None = None,
        conversations_root: str = DEFAULT_CONVERSATIONS_ROOT,
        remote_root: str = DEFAULT_REMOTE_ROOT,
        base_environment: Mapping[str, str] | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        retry_attempts: int = 3,
        command_api: CommandMode = "auto",
        temp_root: str = "/tmp",
        client: AsyncAioClient | None = None,
        conversation_store: ConversationStore | str | None = None,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ) -> None:
        workspace = (
            ConversationWorkspace(conversations_root, conversation_id)
            if conversation_id is not None
            else None
        )
        super().__init__(
            base_environment=base_environment, workspace=workspace, upload_policy=upload_policy
        )
        self._remote_root = checked_remote_root(remote_root)
        self._owns_client = client is None
        self._client = client or AsyncAioClient(
            validate_base_url(base_url),
            token=token,
            api_key=api_key,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry_attempts=retry_attempts,
        )
        self._runner = AsyncCommandRunner(self._client, mode=command_api, temp_root=temp_root)
        self._files = AsyncAioFileSystem(self._client, self._runner)
        self._default_directory = (
            workspace.directory if workspace else posixpath.dirname(self._remote_root)
        )
        self._root_ready = False
        self._root_lock = LoopLocal(asyncio.Lock)
        self._first_use = FirstUse()
        self._running: set[str] = set()
        self._guard, self._owned_store = workspace_guard(
            self.name,
            workspace,
            conversation_store,
            service_key=service_key_for_url(validate_base_url(base_url)),
            exclusive=exclusive,
            lease_ttl_seconds=lease_ttl_seconds,
            lease_wait_seconds=lease_wait_seconds,
            activity_interval_seconds=activity_interval_seconds,
            register=False,
            guard_type=AsyncConversationGuard,
        )

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return "aio"

    @property
    def default_working_directory(self) -> str:
        return self._default_directory

    @property
    def client(self) -> AsyncAioClient:
        """The HTTP client (its :attr:`~AsyncAioClient.request_count` counts requests)."""
        return self._client

    async def command_api(self) -> str:
        """``bash`` or ``shell``: the command API in use (detected on first use)."""
        return await self._runner.mode()

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        if request.skills:
            await self._ensure_root()
        return await super().prepare(request)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        self._ensure_open()
        await self._ensure_root()
        return await super().get_file_system()

    # ----------------------------------------------------------------- hooks

    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        cwd = command_cwd(self._default_directory, working_directory)
        make_dirs = () if self._root_ready else (self._default_directory,)
        token = uuid.uuid4().hex
        started = time.monotonic()
        spec = CommandSpec(
            command=request.command,
            cwd=cwd,
            environment={**environment, CANCEL_MARKER_VARIABLE: token},
            timeout=request.timeout_seconds,
            cap=request.max_output_bytes,
            make_dirs=make_dirs,
        )
        self._running.add(token)
        try:
            if make_dirs:  # the command creates the workspace: the runtime's first use, maybe
                with self._first_use.attach(self._audit_fields()):
                    outcome = await self._runner.run(spec)
            else:
                outcome = await self._runner.run(spec)
        except asyncio.CancelledError:
            await asyncio.shield(self._kill(token))
            raise
        except Exception as exc:
            if self.closed:
                raise closed_error(self.name) from exc
            raise
        finally:
            self._running.discard(token)
        if self.closed:
            raise closed_error(self.name)  # close() killed the command
        result = execution_result(outcome, request, cwd, started)
        self._root_ready = True
        return result

    async def _kill(self, token: str) -> None:
        """Kill the processes of the cancelled command marked ``token`` (failures are logged:
        the cancellation itself must still propagate)."""
        spec = CommandSpec(
            command=kill_marked_command(token),
            cwd="/",
            environment={},
            timeout=_KILL_TIMEOUT,
            cap=4096,
        )
        try:
            await self._runner.run(spec)
        except ExecutionTransportError as exc:
            logger.warning("stopping a cancelled AIO Sandbox command failed: %s", exc)

    def _raw_file_system(self) -> AsyncSkillRuntimeFileSystem:
        return self._files

    async def _close_resources(self) -> None:
        running = sorted(self._running)
        if running:
            await asyncio.gather(*(self._kill(token) for token in running))
            logger.info("killed %d running command(s) of the closed AIO runtime", len(running))
        try:
            await self._runner.close()
        finally:
            try:
                if self._owns_client:
                    await self._client.close()
            finally:
                if self._owned_store is not None:
                    await asyncio.to_thread(self._owned_store.close)

    def _skills_root(self) -> str | None:
        if self._workspace is not None:
            return self._workspace.skills_directory
        return self._remote_root

    async def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Upload one ``.tar.gz`` of the skill (built in a worker thread) and unpack it with one
        command."""
        archive, size = await asyncio.to_thread(build_skill_archive, files)
        try:
            staging = await self._runner.staging_path(".tar.gz")
            try:
                await self._client.upload(
                    staging, archive, size, idempotent=True, read_timeout=600.0
                )
            except AioSandboxError as exc:
                raise upload_failure(skill, exc) from exc
        finally:
            archive.close()
        try:
            outcome = await self._runner.run(unpack_spec(unpack_command(staging, target)))
        except ExecutionTransportError as exc:
            raise unpack_error(skill, exc) from exc
        failure = unpack_failure(skill, outcome)
        if failure is not None:
            raise failure
        logger.debug("uploaded skill %s as one %d-byte archive", skill.name, size)

    async def _mark_ready(self, target: str, *, digest: str) -> None:
        await self._files.write_marker(ready_marker_path(target), "ok\n")

    # --------------------------------------------------------------- helpers

    async def _ensure_root(self) -> None:
        """Create the workspace (or the shared skills root) on first use: one command."""
        if self._root_ready:
            return
        async with self._root_lock.get():
            if self._root_ready:
                return
            root = self._workspace.directory if self._workspace else self._remote_root
            with self._first_use.attach(self._audit_fields()):
                await self._files.make_directory(root)
            self._root_ready = True
