"""``AsyncOpenSandboxSkillRuntime``: the OpenSandbox runtime for asyncio programs.

Commands and file calls are native: they go through the SDK's async API, with no thread per
call, and cancelling an awaiting ``execute`` interrupts the command in the sandbox, which kills
its whole process group (:mod:`.async_commands`). File calls run on the caller's event loop;
command streams run on the runtime's own loop in one daemon thread, so that the end of a
caller's loop (``asyncio.run`` per call, a fresh loop per test, a framework's sync-over-async
call) never cuts a stream in execd's grace period, which would kill every command running in
the sandbox. One runtime object therefore serves any number of consecutive (or simultaneous)
caller loops.

The sandbox lifecycle and the conversation record follow exactly the rules of
:class:`~.runtime.OpenSandboxSkillRuntime` (see its module docs) because they *are* that code: the
async runtime holds a sync runtime object as its lifecycle core and runs its attach, record
reads and writes, recovery and kill steps in a worker thread. Those steps happen once per
attach and once per prepared skill, not per command, so a server with hundreds of concurrent
commands uses a handful of threads. The conversation store is the sync
:class:`~skillruntime.core.conversations.ConversationStore` (SQL stores included) used in that
thread; sync and async runtime objects on one conversation share the record and resume each
other.

``exclusive=True`` holds the conversation's lease during every prepare, execute and file
operation as the sync runtime does, kept by asyncio
(:mod:`skillruntime.core.conversations.async_exclusive`): the wait sleeps on the loop, the renewer
is a task and the store calls run in worker threads. Sync and async runtimes of one conversation
take turns with each other.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import posixpath
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opensandbox.sandbox import Sandbox
from opensandbox.sync.sandbox import SandboxSync
from skillruntime.core.conversations import ConversationRecord
from skillruntime.core.conversations.async_exclusive import (
    AsyncConversationGuard,
    AsyncExclusiveRuntimeMixin,
)
from skillruntime.core.conversations.exclusive import DEFAULT_ACTIVITY_INTERVAL_SECONDS
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.durability.automatic import AsyncDurableWorkspace, Durability
from skillruntime.core.errors import RuntimeFileError
from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.async_spi import AsyncBaseSkillRuntime
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .async_commands import AsyncCommandRunner
from .async_files import AsyncOpenSandboxFileSystem
from .async_sandbox import (
    DEFAULT_MAX_CONNECTIONS,
    async_connection_config,
    async_transport,
    close_async_handle,
    open_async_handle,
)
from .commands import (
    DEFAULT_DEADLINE_GRACE_SECONDS,
    CommandNotStartedError,
    CommandOutcomeUnknownError,
)
from .errors import OpenSandboxError, OpenSandboxExecutionError
from .pool import OpenSandboxPool
from .retry import DEFAULT_RETRY_SECONDS
from .runtime import (
    PREPARE_ATTEMPTS,
    OpenSandboxSkillRuntime,
    SandboxReplacedWhilePreparingError,
    may_mean_sandbox_gone,
    replaced_error,
    replaced_too_often,
)

__all__ = ["AsyncOpenSandboxSkillRuntime"]

logger = logging.getLogger(__name__)

_Pair = tuple[SandboxSync, Sandbox]
"""The lifecycle core's handle on a sandbox and the async handle on the same sandbox."""


class AsyncOpenSandboxSkillRuntime(AsyncExclusiveRuntimeMixin, AsyncBaseSkillRuntime):
    """Runs skills in an OpenSandbox sandbox from asyncio; see the module docs.

    Takes the keyword arguments of :class:`~.runtime.OpenSandboxSkillRuntime` (validated by it),
    plus ``max_connections``: the size of each of the runtime's HTTP connection pools (one on
    its command loop, which bounds the commands in flight at once, and one per caller event
    loop for file calls); more wait for a connection.
    """

    def __init__(
        self,
        *,
        base_environment: Mapping[str, str] | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        uid: int | None = None,
        gid: int | None = None,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        deadline_grace_seconds: float = DEFAULT_DEADLINE_GRACE_SECONDS,
        ready_timeout_seconds: float = 30.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
        **options: Any,
    ) -> None:
        # The lifecycle core keeps the record; the lease and activity are this runtime's own
        # guard's (asyncio), on the same store and key.
        self._core = OpenSandboxSkillRuntime(
            base_environment=base_environment,
            upload_policy=upload_policy,
            uid=uid,
            gid=gid,
            retry_seconds=retry_seconds,
            deadline_grace_seconds=deadline_grace_seconds,
            ready_timeout_seconds=ready_timeout_seconds,
            activity_interval_seconds=activity_interval_seconds,
            **options,
        )
        self._keeper = self._core.keeper
        binding = self._keeper.binding
        if exclusive and binding is None:
            self._core.close()
            raise ValueError("exclusive=True needs a conversation_id")
        if binding is not None:
            workspace = self._core.workspace
            assert workspace is not None
            try:
                self._guard = AsyncConversationGuard(
                    binding.store,
                    binding.storage_key,
                    description=f"conversation {workspace.conversation_id}",
                    exclusive=exclusive,
                    lease_ttl_seconds=lease_ttl_seconds,
                    lease_wait_seconds=lease_wait_seconds,
                    activity_interval_seconds=activity_interval_seconds,
                )
            except BaseException:
                self._core.close()
                raise
        super().__init__(
            base_environment=base_environment,
            workspace=self._core.workspace,
            upload_policy=upload_policy,
        )
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._transport = async_transport(max_connections)
        self._async_config = async_connection_config(self._core.connection_config, self._transport)
        self._ready_timeout = ready_timeout_seconds
        self._runner = AsyncCommandRunner(
            uid=uid, gid=gid, deadline_grace_seconds=deadline_grace_seconds
        )
        self._files = AsyncOpenSandboxFileSystem(
            self._live_handle,
            retry_seconds=retry_seconds,
            recover=self._recover_handle,
            owner=str(uid) if uid is not None else None,
            group=str(gid) if gid is not None else None,
            run_command=self._run_file_command,
        )
        self._current: _Pair | None = None
        self._last_sandbox_id: str | None = None
        self._attach_lock = asyncio.Lock()
        self._pin: contextvars.ContextVar[_Pair | None] = contextvars.ContextVar(
            f"opensandbox-pin-{id(self)}", default=None
        )
        durability = options.get("durability")
        binding = self._keeper.binding
        self._durable = (
            AsyncDurableWorkspace(
                durability, conversation_id=binding.conversation_id, binding=binding
            )
            if isinstance(durability, Durability) and binding is not None
            else None
        )
        self._closing = False

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return "opensandbox"

    @property
    def default_working_directory(self) -> str:
        return self._core.default_working_directory

    @property
    def sandbox_id(self) -> str | None:
        """Id of the sandbox this runtime is attached to (``None`` before first use)."""
        return self._core.sandbox_id

    @property
    def conversation_record(self) -> ConversationRecord | None:
        """The conversation record as last read or written by this runtime."""
        return self._core.conversation_record

    @property
    def file_requests(self) -> int:
        """File-API requests sent so far (diagnostics, benchmarks)."""
        return self._core.file_requests + self._files.requests

    @property
    def conversation_record_key(self) -> str | None:
        """Storage key of the conversation record (``None`` without a conversation)."""
        return self._core.conversation_record_key

    @property
    def pool(self) -> OpenSandboxPool | None:
        """The warm pool new conversations are served from (``None`` unless ``pool_size``;
        shared with the sync face: the claims block, and run in a worker thread)."""
        return self._core.pool

    @property
    def durable_workspace(self) -> AsyncDurableWorkspace | None:
        """The automatic snapshots and restores of this runtime (``None`` without
        ``durability``; docs/durability.md)."""
        return self._durable

    async def close(self) -> None:
        """Snapshot a used conversation when ``durability`` asks for it (only in the sandbox
        this runtime is attached to: never one created for it), then close."""
        if self._durable is not None and not self._closed and self._current is not None:
            self._closing = True
            try:
                await self._durable.closing(self)
            finally:
                self._closing = False
        await super().close()

    async def destroy_conversation_sandbox(self) -> None:
        """The same as :meth:`destroy_conversation` (the name every container runtime shares)."""
        await self.destroy_conversation()

    async def destroy_conversation(self) -> None:
        """End the conversation's sandbox: its record deleted first, then the kill (see
        :meth:`~.runtime.OpenSandboxSkillRuntime.destroy_conversation`); an exclusive runtime
        does it under the conversation's lease."""
        if self._keeper.binding is None:
            raise OpenSandboxError("destroy_conversation() needs a conversation_id")
        async with self.exclusive_session(), self._attach_lock:
            current, self._current = self._current, None
            await close_async_handle(current[1] if current else None)
            with self._lock:
                self._prepared.clear()
            # Its execd dies with the sandbox, cutting the streams still being read: they end
            # first (see _close_resources).
            await self._runner.wait_for_drains()
            await asyncio.to_thread(self._keeper.destroy)
            if self._durable is not None:
                await self._durable.forget()

    # ----------------------------------------------------------------- handles

    async def _pair(self) -> _Pair:
        """The pinned pair inside a preparation, else the live one (attached on first use)."""
        pinned = self._pin.get()
        if pinned is not None:
            return pinned
        self._ensure_open()
        current = self._current
        if current is not None and self._keeper.current is current[0]:
            if self._durable is not None:
                await self._durable.before(self)
            return current
        if self._closing:
            raise OpenSandboxError(
                "the conversation's sandbox went away; no new one is made while closing"
            )
        pair = await self._attach_pair()
        if self._durable is not None:
            await self._durable.before(self)
        return pair

    async def _attach_pair(self) -> _Pair:
        """Attach (or re-attach) under the attach lock; a new sandbox is announced to the
        durable workspace."""
        async with self._attach_lock:
            self._ensure_open()
            current = self._current
            if current is not None and self._keeper.current is current[0]:
                return current
            sync = await asyncio.to_thread(self._keeper.attach)
            handle = await open_async_handle(
                sync, self._async_config, ready_timeout_seconds=self._ready_timeout
            )
            self._current = (sync, handle)
            if current is not None:
                await close_async_handle(current[1])
            if self._last_sandbox_id is not None and self._last_sandbox_id != sync.id:
                with self._lock:  # a new sandbox holds none of the earlier copies
                    self._prepared.clear()
            if self._durable is not None and self._last_sandbox_id != sync.id:
                self._durable.attached(sync.id)
            self._last_sandbox_id = sync.id
            return self._current

    async def _live_handle(self) -> Sandbox:
        return (await self._pair())[1]

    async def _recover_handle(self, handle: Sandbox, exc: BaseException) -> bool:
        """The file system's recovery: ``True`` when ``handle``'s sandbox has vanished."""
        for pair in (self._pin.get(), self._current):
            if pair is not None and pair[1] is handle:
                return await self._recover(pair[0], exc)
        return False

    async def _recover(self, sandbox: SandboxSync, exc: BaseException) -> bool:
        if not may_mean_sandbox_gone(exc):
            return False
        return await asyncio.to_thread(self._keeper.recover, sandbox, exc)

    async def _vanished(self, sandbox: SandboxSync) -> bool:
        return await asyncio.to_thread(
            functools.partial(self._keeper.vanished, sandbox, patient=True)
        )

    # ------------------------------------------------------------------- hooks

    async def _prepare_one(self, skill: Skill, config: SkillRuntimeConfig) -> Skill:
        """Prepare ``skill`` pinned to one sandbox, from the start again when it was replaced
        midway (the rule of the sync runtime)."""
        failure: SandboxReplacedWhilePreparingError | None = None
        for _ in range(PREPARE_ATTEMPTS):
            token = self._pin.set(await self._pair())
            try:
                return await super()._prepare_one(skill, config)
            except SandboxReplacedWhilePreparingError as exc:
                failure = exc
                logger.warning(
                    "sandbox %s vanished while skill %s was being prepared; preparing it again "
                    "from the start in the replacement",
                    exc.sandbox_id,
                    skill.name,
                )
            finally:
                self._pin.reset(token)
        raise replaced_too_often(skill) from failure

    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        pinned = self._pin.get()
        sandbox, handle = pinned if pinned is not None else await self._pair()
        try:
            result = await self._run_in(handle, request, working_directory, environment)
        except CommandNotStartedError as exc:
            if exc.__cause__ is None or not await self._recover(sandbox, exc.__cause__):
                raise
            if pinned is not None:
                raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
            logger.warning("sandbox %s vanished before a command started; re-attaching", sandbox.id)
            _, fresh = await self._pair()
            return await self._run_in(fresh, request, working_directory, environment)
        except OpenSandboxExecutionError as exc:
            if await self._vanished(sandbox):
                if pinned is not None:
                    raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
                raise replaced_error(sandbox.id) from exc
            if isinstance(exc, CommandOutcomeUnknownError):
                # Held until the watchdog has ended the command (a lease with it).
                await asyncio.sleep(max(exc.ends_by - time.monotonic(), 0.0))
            raise
        if result.exit_code == -1 and not result.timed_out and await self._vanished(sandbox):
            # The command was killed with its sandbox (e.g. the server restarted).
            if pinned is not None:
                raise SandboxReplacedWhilePreparingError(sandbox.id)
            raise replaced_error(sandbox.id)
        return result

    async def _run_file_command(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        """A command of the file system (its one-command search), from ``/``, with no
        environment."""
        return await self._run(request, "/", {})

    async def _run_in(
        self,
        handle: Sandbox,
        request: SkillExecutionRequest,
        working_directory: str,
        environment: dict[str, str],
    ) -> SkillExecutionResult:
        return await self._runner.run(
            handle,
            request.command,
            working_directory=working_directory,
            environment=environment,
            timeout_seconds=request.timeout_seconds,
            max_output_bytes=request.max_output_bytes,
        )

    def _raw_file_system(self) -> AsyncSkillRuntimeFileSystem:
        return self._files

    def _skills_root(self) -> str | None:
        return self._keeper.skills_root

    async def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Upload into ``target`` of the pinned sandbox (one directory request, then batches)."""
        sandbox, handle = self._pin.get() or await self._pair()
        try:
            await self._files.make_directories([target], sandbox=handle)
            await self._files.upload_files(
                (
                    (item.local_path, posixpath.join(target, item.relative_path), item.executable)
                    for item in files
                ),
                sandbox=handle,
            )
        except RuntimeFileError as exc:
            if exc.__cause__ is not None and await self._recover(sandbox, exc.__cause__):
                raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
            raise

    async def _is_ready(self, target: str) -> bool:
        sandbox, _ = self._pin.get() or await self._pair()
        return await asyncio.to_thread(self._keeper.is_ready, sandbox, target)

    async def _mark_ready(self, target: str, *, digest: str) -> None:
        sandbox, _ = self._pin.get() or await self._pair()
        await asyncio.to_thread(
            functools.partial(self._keeper.mark_ready, sandbox, target, digest=digest)
        )

    async def _close_resources(self) -> None:
        async with self._attach_lock:
            current, self._current = self._current, None
        try:
            # The streams still being read end first. A conversation's sandbox runs on, and
            # cutting a stream execd has not ended yet would make it kill every command running
            # there (see .async_commands); a private one is killed next, and its execd dies with
            # it, cutting the stream, which the SDK logs at ERROR with the httpx traceback.
            await self._runner.wait_for_drains()
            await asyncio.to_thread(self._core.close)  # a private sandbox is killed here
            await self._runner.cancel_drains()
            await close_async_handle(current[1] if current else None)
        finally:
            await self._runner.close()  # its loop's connection pool is closed with it
            await self._transport.aclose()
