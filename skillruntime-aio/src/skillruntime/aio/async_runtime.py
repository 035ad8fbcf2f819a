"""``AsyncAioSkillRuntime``: skill commands and files in an AIO Sandbox service someone else runs.

``skillruntime.aio.async_runtime`` (for asyncio programs, native on ``httpx``) is the source of
both runtimes: ``skillruntime.aio.runtime`` (``AioSandboxSkillRuntime``, blocking, safe to share
between threads) is generated from it by ``scripts/generate_sync.py``. The rules around their I/O
live once in :mod:`.runtime_rules` (also importable from here), the command flows in
:mod:`.command_plans`, the file requests in :mod:`.file_rules` and :mod:`.wire`.

The runtime talks HTTP to the service (one connection pool of its :class:`AsyncAioClient`); it
never creates, stops or cleans up the service. Two modes:

* **Conversation** (``conversation_id``): the workspace is ``<conversations_root>/<id>`` on the
  service, created on first use; it is the default working directory and scopes every file
  operation and working directory lexically (the service's shell can still reach any path the
  ``gem`` user can). Skills are prepared under ``<workspace>/skills/<name>-<digest12>/``.
* **Shared root** (no conversation): skills are prepared under ``remote_root``; commands run in
  its parent by default. Paths are not confined.

The service's disk is the state: no conversation record is kept (an optional store holds only
the lease of ``exclusive=True``). A prepared copy is complete
when its ready marker ``.<name>-<digest12>.ready`` exists next to it, so a new runtime object —
in this process or on another node — checks that with one call and uploads nothing when it is
there. Preparing uploads one archive and unpacks it with one command.

**Stopping a command.** Every command carries a unique
:data:`~skillruntime.core.runtime.bridge.CANCEL_MARKER_VARIABLE` in its environment (the caller's
when it set one, as the thread bridge of ``to_async`` does), so that the
kill sweep of :func:`~skillruntime.core.runtime.bridge.kill_marked_command`, run as one more
command, can send ``SIGKILL`` to every process holding the marker (the whole tree the command
started; closing its session alone would not). :meth:`close` sweeps the commands still running
(their :meth:`execute` raises ``RuntimeClosedError``), then closes the command sessions this
runtime opened and its HTTP connections; it deletes no workspace and no prepared copy.

On the async face, when the task awaiting :meth:`execute` is cancelled (``task.cancel()`` or
:func:`asyncio.timeout`), the runtime retires the command's session on the service, runs the
same sweep, and only then lets the cancellation propagate; the runtime stays usable. One async
runtime object serves consecutive event loops (``asyncio.run`` per call): the client keeps a
connection pool per loop and the runtime's locks are per loop.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath

if False:  # unasync: sync
    import threading
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
from skillruntime.core.durability.automatic import AsyncDurableWorkspace, Durability
from skillruntime.core.errors import ExecutionTransportError
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.async_spi import AsyncBaseSkillRuntime, LoopLocal
from skillruntime.core.runtime.rules import closed_error
from skillruntime.core.runtime.spi import ready_marker_path
from skillruntime.core.runtime.workspace import ConversationWorkspace
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .archive import build_skill_archive, unpack_command
from .async_client import AsyncAioClient
from .async_commands import AsyncCommandRunner
from .async_files import AsyncAioFileSystem
from .command_plans import CommandMode, CommandSpec
from .defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT
from .errors import AioSandboxError
from .first_use import FirstUse
from .options import DEFAULT_CONVERSATIONS_ROOT, DEFAULT_REMOTE_ROOT, validate_base_url
from .runtime_rules import (
    KILL_TIMEOUT,
    PREPARE_TIMEOUT,
    checked_remote_root,
    command_cwd,
    execution_result,
    kill_spec,
    marked_environment,
    unpack_error,
    unpack_failure,
    unpack_spec,
    upload_failure,
)

__all__ = [
    "KILL_TIMEOUT",
    "PREPARE_TIMEOUT",
    "AsyncAioSkillRuntime",
    "checked_remote_root",
    "command_cwd",
    "execution_result",
    "kill_spec",
    "marked_environment",
    "unpack_error",
    "unpack_failure",
    "unpack_spec",
    "upload_failure",
]

logger = logging.getLogger(__name__)


class AsyncAioSkillRuntime(AsyncExclusiveRuntimeMixin, AsyncBaseSkillRuntime):
    """Runs skills in an existing AIO Sandbox service; see the module docs for the modes.

    ``token`` is sent as ``Authorization: Bearer`` and ``api_key`` as ``X-AIO-API-Key``.
    ``command_api`` forces ``bash`` (``/v1/bash/exec``) or ``shell`` (``/v1/shell/exec``);
    ``auto`` detects it once. ``temp_root`` is a directory on the service for staged uploads and
    per-command output files. ``client`` replaces the HTTP client (an :class:`AsyncAioClient`;
    its owner closes it).

    ``conversation_store`` (a store or a URL; one built from a URL is closed with the runtime) and
    ``exclusive=True`` make every prepare, execute and file operation hold the conversation's
    lease, so processes and nodes sharing the service's workspace take turns (see
    :mod:`skillruntime.core.conversations.async_exclusive`); sync and async runtimes of one
    conversation take turns with each other. The lease key is the service URL and the
    conversation id: every node must name the service by the same URL. The store keeps only the
    lease (no record: the service's disk is the state, so sweeps do not remove AIO workspaces).
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
        durability: Durability | None = None,
    ) -> None:
        if durability is not None and conversation_id is None:
            raise ValueError("durability needs a conversation_id")
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
        if True:  # unasync: async
            self._root_lock = LoopLocal(asyncio.Lock)
        else:  # unasync: sync
            self._root_lock = threading.Lock()
        self._first_use = FirstUse()
        self._running: dict[str, str] = {}  # the commands running now: run id -> marker token
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
        return "aio"

    @property
    def default_working_directory(self) -> str:
        return self._default_directory

    @property
    def client(self) -> AsyncAioClient:
        """The HTTP client (its :attr:`~AsyncAioClient.request_count` counts requests)."""
        return self._client

    if True:  # unasync: async

        async def command_api(self) -> str:
            """``bash`` or ``shell``: the command API in use (detected on first use)."""
            return await self._runner.mode()

    else:  # unasync: sync

        @property
        def command_api(self) -> str:
            """``bash`` or ``shell``: the command API in use (detected on first use)."""
            return self._runner.mode

    @property
    def durable_workspace(self) -> AsyncDurableWorkspace | None:
        """The automatic snapshots and restores of this runtime (``None`` without
        ``durability``; docs/durability.md)."""
        return self._durable

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        self._ensure_open()
        if self._durable is not None:
            await self._durable.before(self)
        return await super().execute(request)

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        if request.skills:
            await self._ensure_root()
        if self._durable is not None:
            await self._durable.before(self)
        return await super().prepare(request)

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        self._ensure_open()
        await self._ensure_root()
        if self._durable is not None:
            await self._durable.before(self)
        return await super().get_file_system()

    async def close(self) -> None:
        """Snapshot a used conversation when ``durability`` asks for it, then close."""
        if self._durable is not None and not self._closed:
            await self._durable.closing(self)
        await super().close()

    # ----------------------------------------------------------------- hooks

    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        cwd = command_cwd(self._default_directory, working_directory)
        make_dirs = () if self._root_ready else (self._default_directory,)
        run_id = uuid.uuid4().hex
        marked, token = marked_environment(environment)
        started = time.monotonic()
        spec = CommandSpec(
            command=request.command,
            cwd=cwd,
            environment=marked,
            timeout=request.timeout_seconds,
            cap=request.max_output_bytes,
            make_dirs=make_dirs,
        )
        self._running[run_id] = token
        if self.closed:  # close() began since execute() checked: its sweep may miss this command
            del self._running[run_id]
            raise closed_error(self.name)
        try:
            if True:  # unasync: async
                try:
                    if make_dirs:  # the command creates the workspace: the runtime's first use
                        with self._first_use.attach(self._audit_fields()):
                            outcome = await self._runner.run(spec)
                    else:
                        outcome = await self._runner.run(spec)
                except asyncio.CancelledError:
                    await asyncio.shield(self._kill(token))
                    raise
            else:  # unasync: sync  # noqa: PLR5501
                if make_dirs:  # the command creates the workspace: the runtime's first use, maybe
                    with self._first_use.attach(self._audit_fields()):
                        outcome = self._runner.run(spec)
                else:
                    outcome = self._runner.run(spec)
        except Exception as exc:
            if self.closed:
                raise closed_error(self.name) from exc
            raise
        finally:
            self._running.pop(run_id, None)
        if self.closed:
            raise closed_error(self.name)  # close() killed the command
        result = execution_result(outcome, request, cwd, started)
        self._root_ready = True
        return result

    async def _kill(self, token: str) -> None:
        """Kill the processes of the command marked ``token`` (still running at close, or
        cancelled on the async face); a failure is logged: the close or the cancellation must
        still go on."""
        try:
            await self._runner.run(kill_spec(token))
        except ExecutionTransportError as exc:
            logger.warning("stopping an AIO Sandbox command failed: %s", exc)

    def _raw_file_system(self) -> AsyncSkillRuntimeFileSystem:
        return self._files

    async def _close_resources(self) -> None:
        running = sorted(set(self._running.copy().values()))  # copy: threads may add meanwhile
        if running:
            if True:  # unasync: async
                await asyncio.gather(*(self._kill(token) for token in running))
            else:  # unasync: sync
                for token in running:
                    self._kill(token)
            logger.info("killed %d running command(s) of the closed AIO runtime", len(running))
        try:
            await self._runner.close()
        finally:
            try:
                if self._owns_client:
                    await self._client.close()
            finally:
                if self._owned_store is not None:
                    if True:  # unasync: async
                        await asyncio.to_thread(self._owned_store.close)
                    else:  # unasync: sync
                        self._owned_store.close()

    def _skills_root(self) -> str | None:
        if self._workspace is not None:
            return self._workspace.skills_directory
        return self._remote_root

    async def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Upload one ``.tar.gz`` of the skill (built in a worker thread on the async face) and
        unpack it with one command; the archive is closed whatever happens."""
        if True:  # unasync: async
            archive, size = await asyncio.to_thread(build_skill_archive, files)
        else:  # unasync: sync
            archive, size = build_skill_archive(files)
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
        if True:  # unasync: async  # noqa: SIM108
            lock = self._root_lock.get()
        else:  # unasync: sync
            lock = self._root_lock
        async with lock:
            if self._root_ready:
                return
            root = self._workspace.directory if self._workspace else self._remote_root
            with self._first_use.attach(self._audit_fields()):
                await self._files.make_directory(root)
            self._root_ready = True
