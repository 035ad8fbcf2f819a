"""The async SPI: :class:`AsyncSkillRuntime` and the shared base :class:`AsyncBaseSkillRuntime`.

The twin of :mod:`skillruntime.core.runtime.spi`: the same method names and contracts (DESIGN §3),
as coroutines, with ``async with`` instead of ``with``. :class:`AsyncBaseSkillRuntime` follows the
same rules as :class:`~skillruntime.core.runtime.spi.BaseSkillRuntime` through the same functions of
:mod:`skillruntime.core.runtime.rules` (working directory, environment precedence, digest cache,
preparation steps, bootstrap errors), with an :class:`asyncio.Lock` per skill for single-flight.

**Any event loop.** An async runtime object serves whichever event loop awaits it, one after
the other (a program calling :func:`asyncio.run` per request): it keeps no loop-bound object
(lock, connection pool, future) from one loop for use on another. :class:`LoopLocal` holds
one such object per loop.

**Cancellation is a contract.** Cancelling a task that awaits :meth:`AsyncSkillRuntime.execute`
(directly or through :func:`asyncio.timeout`) stops the command — the whole process tree, locally
or in the sandbox — before the :class:`asyncio.CancelledError` propagates, and the runtime stays
usable. A cancelled :meth:`AsyncSkillRuntime.prepare` caches nothing, so the next call retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Generic, TypeVar

from ..files.async_spi import AsyncSkillRuntimeFileSystem
from ..models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
    SkillRuntimeConfig,
    validate_environment,
)
from ..observability.audit import audited
from ..skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy
from .async_workspace import AsyncScopedFileSystem
from .closing import AsyncCloseable
from .rules import (
    Bootstrap,
    CheckReady,
    MarkReady,
    PlaceFiles,
    PrepareKey,
    RuntimeState,
    ScannedSkill,
    audit_fields,
    bootstrap_failure,
    bootstrap_requests,
    bootstrap_transport_failure,
    command_directory,
    place_failure,
    preparation_plan,
    prepare_key,
    scan_skill,
)
from .spi import PreparedSkill, ready_marker_path
from .workspace import ConversationWorkspace

__all__ = ["AsyncBaseSkillRuntime", "AsyncSkillRuntime", "LoopLocal", "run_bootstrap_async"]

logger = logging.getLogger(__name__)

V = TypeVar("V")


class LoopLocal(Generic[V]):
    """One ``factory()`` value per event loop: what :meth:`get` (or :meth:`aget`) returns on
    the running loop.

    For loop-bound objects (an :class:`asyncio.Lock` binds to the loop of its first waiter, a
    connection pool to the loop of its sockets) kept by an object that must serve any loop.
    With ``aclose``, a value fetched with :meth:`aget` is closed on its own loop when that loop's
    runner finalises async generators (:meth:`asyncio.loop.shutdown_asyncgens`, which
    :func:`asyncio.run` calls before closing the loop), and :meth:`aclose` closes them all.
    Values of loops closed otherwise are dropped unclosed when a new loop asks. Thread-safe.
    """

    def __init__(
        self, factory: Callable[[], V], *, aclose: Callable[[V], Awaitable[None]] | None = None
    ) -> None:
        self._factory = factory
        self._aclose = aclose
        self._slots: dict[asyncio.AbstractEventLoop, _LoopSlot[V]] = {}
        self._guard = threading.Lock()

    def get(self) -> V:
        """The running loop's value, made on its first use there."""
        return self._slot(asyncio.get_running_loop()).value

    async def aget(self) -> V:
        """The running loop's value; with ``aclose``, it is closed when the loop shuts down."""
        loop = asyncio.get_running_loop()
        slot = self._slot(loop)
        if self._aclose is not None and slot.keeper is None:
            slot.keeper = self._close_at_shutdown(loop, slot)
            await slot.keeper.__anext__()  # registers the generator with the running loop
        return slot.value

    async def aclose(self) -> None:
        """Close every value (``aclose``) and forget them: the running loop's here, those of
        other loops still running on their loops; those of closed loops are dropped."""
        current = asyncio.get_running_loop()
        with self._guard:
            slots, self._slots = self._slots, {}
        for loop, slot in slots.items():
            if loop is current:
                await self._close(slot)
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    asyncio.run_coroutine_threadsafe(self._close(slot), loop)

    def _slot(self, loop: asyncio.AbstractEventLoop) -> _LoopSlot[V]:
        with self._guard:
            slot = self._slots.get(loop)
            if slot is None:
                for old in [known for known in self._slots if known.is_closed()]:
                    del self._slots[old]
                slot = self._slots[loop] = _LoopSlot(self._factory())
            return slot

    async def _close_at_shutdown(
        self, loop: asyncio.AbstractEventLoop, slot: _LoopSlot[V]
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._guard:
                if self._slots.get(loop) is slot:
                    del self._slots[loop]
            if self._aclose is not None:
                await self._aclose(slot.value)

    async def _close(self, slot: _LoopSlot[V]) -> None:
        keeper, slot.keeper = slot.keeper, None
        if keeper is not None:
            await keeper.aclose()  # closes the value
        elif self._aclose is not None:
            await self._aclose(slot.value)


class _LoopSlot(Generic[V]):
    """A value of :class:`LoopLocal` and the generator that closes it at loop shutdown."""

    def __init__(self, value: V) -> None:
        self.value = value
        self.keeper: AsyncGenerator[None, None] | None = None


class AsyncSkillRuntime(AsyncCloseable, ABC):
    """Where skill commands run and skill files live, for asyncio programs.

    An async context manager, safe to use from many tasks of one event loop. Contracts are those
    of :class:`~skillruntime.core.runtime.spi.SkillRuntime`, plus the cancellation rule of this
    module.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """Stable runtime name (``local``, ``opensandbox``, ``aio``, …)."""

    @property
    @abstractmethod
    def default_working_directory(self) -> str:
        """Working directory of commands that name none; the default root of file searches."""

    @abstractmethod
    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        """Make the skills available in the runtime; same count and order, new objects."""

    @abstractmethod
    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        """Run one shell command; a non-zero exit or a timeout is a result, not an exception.

        Cancelling the awaiting task kills the command's process tree.
        """

    @abstractmethod
    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        """The file system that shares this runtime's execution boundary."""

    @abstractmethod
    async def close(self) -> None:
        """Release what the runtime owns; idempotent. Later calls raise ``RuntimeClosedError``."""


async def run_bootstrap_async(
    runtime: AsyncSkillRuntime, skill: Skill, config: SkillRuntimeConfig
) -> None:
    """Run ``config``'s bootstrap commands in order in the prepared skill root.

    The first command that exits non-zero or times out stops the run with
    :class:`~skillruntime.core.errors.SkillPrepareError` (exit code and output tail).
    """
    for index, step, request in bootstrap_requests(skill, config):
        with audited("bootstrap", skill_name=skill.name, **audit_fields(runtime)) as record:
            result = record.result(await runtime.execute(request))
        failure = bootstrap_failure(skill, index, step, result)
        if failure is not None:
            raise failure


class AsyncBaseSkillRuntime(RuntimeState, AsyncSkillRuntime):
    """Shared implementation of the async SPI; a backend supplies a few hooks.

    Hooks: :meth:`_run` (coroutine: one command with the final cwd and environment overlay),
    :meth:`_raw_file_system`, :meth:`_close_resources` (coroutine), and optionally
    :meth:`_place_skill`, :meth:`_is_ready`, :meth:`_mark_ready` (coroutines),
    :meth:`_skills_root` and :meth:`_check_real_path`.
    """

    def __init__(
        self,
        *,
        base_environment: Mapping[str, str] | None = None,
        workspace: ConversationWorkspace | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
    ) -> None:
        self._base_environment = validate_environment(base_environment or {})
        self._workspace = workspace
        self._upload_policy = upload_policy
        self._lock = threading.Lock()
        self._closed = False
        self._prepared: dict[PrepareKey, PreparedSkill] = {}
        self._prepare_locks: LoopLocal[dict[PrepareKey, asyncio.Lock]] = LoopLocal(dict)
        self._skill_environment: dict[str, dict[str, str]] = {}
        self._file_system: AsyncScopedFileSystem | None = None

    # ------------------------------------------------------------------ hooks

    @abstractmethod
    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        """Run ``request.command`` in ``working_directory`` with ``environment`` on top of the
        backend's own; enforce timeout and output bounds; kill the tree when cancelled."""

    @abstractmethod
    def _raw_file_system(self) -> AsyncSkillRuntimeFileSystem:
        """The backend's unscoped file system."""

    @abstractmethod
    async def _close_resources(self) -> None:
        """Release what the runtime owns (called once, from :meth:`close`)."""

    def _skills_root(self) -> str | None:
        """Directory that receives prepared copies, or ``None`` to use skills in place."""
        return self._workspace.skills_directory if self._workspace else None

    def _check_real_path(self, path: str) -> str:
        """Extra check applied to every scoped path (the local runtime resolves symlinks)."""
        return path

    async def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Copy or upload the skill's files into ``target`` (default: through the raw file
        system's ``upload_files``)."""
        fs = self._raw_file_system()
        await fs.delete(target)
        await fs.make_directory(target)
        await fs.upload_files(
            [
                (item.local_path, posixpath.join(target, item.relative_path), item.executable)
                for item in files
            ]
        )

    async def _is_ready(self, target: str) -> bool:
        """True when a complete prepared copy already exists at ``target``."""
        return await self._raw_file_system().exists(ready_marker_path(target))

    async def _mark_ready(self, target: str, *, digest: str) -> None:
        """Record that the copy at ``target`` is complete and bootstrapped; ``digest`` names it
        (:func:`~skillruntime.core.skills.files.prepared_copy_digest`: content and bootstrap
        commands)."""
        await self._raw_file_system().write_text(ready_marker_path(target), "ok\n")

    # --------------------------------------------------------------------- SPI

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        with audited("execute", **self._audit_fields()) as record:
            self._ensure_open()
            cwd = command_directory(
                request.working_directory,
                self.default_working_directory,
                self._workspace,
                self._check_real_path,
            )
            request_environment = validate_environment(request.environment)
            environment = self.effective_environment(request_environment)
            return record.result(await self._run(request, cwd, environment))

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        self._ensure_open()
        with self._lock:
            if self._file_system is None:
                self._file_system = AsyncScopedFileSystem(
                    self._raw_file_system(),
                    workspace=self._workspace,
                    is_closed=lambda: self._closed,
                    check_real_path=self._check_real_path if self._workspace else None,
                    runtime_name=self.name,
                    base_directory=None if self._workspace else self.default_working_directory,
                    audit=self._audit_fields(),
                )
            return self._file_system

    async def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        await self._close_resources()

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        self._ensure_open()
        return [
            await self._prepare_one(skill, request.config_for(skill)) for skill in request.skills
        ]

    async def _prepare_one(self, skill: Skill, config: SkillRuntimeConfig) -> Skill:
        with audited("prepare", skill_name=skill.name, **self._audit_fields()) as record:
            scanned = await asyncio.to_thread(scan_skill, skill, self._upload_policy)
            record.skill_digest = scanned.digest
            return await self._prepare_scanned(skill, config, scanned)

    async def _prepare_scanned(
        self, skill: Skill, config: SkillRuntimeConfig, scanned: ScannedSkill
    ) -> Skill:
        key = prepare_key(skill, scanned.digest, config)
        with self._lock:
            lock = self._prepare_locks.get().setdefault(key, asyncio.Lock())
        async with lock:
            self._ensure_open()
            cached = self._prepared.get(key)
            if cached is not None:
                return skill.with_base_path(cached.base_path)
            started = time.monotonic()
            plan = preparation_plan(skill, config, scanned, self._skills_root())
            try:
                step = next(plan)
                while True:
                    if isinstance(step, CheckReady):
                        step = plan.send(await self._is_ready(step.target))
                        continue
                    if isinstance(step, PlaceFiles):
                        await self._place(step.skill, step.files, step.target)
                    elif isinstance(step, Bootstrap):
                        await self._bootstrap(step.skill, step.config)
                    elif isinstance(step, MarkReady):
                        await self._mark_ready(step.target, digest=step.digest)
                    step = plan.send(None)
            except StopIteration as stop:
                prepared: Skill = stop.value
            self._activate(skill.name, config)
            with self._lock:
                self._prepared[key] = PreparedSkill(prepared.base_path, scanned.digest, config)
            logger.info(
                "prepared skill %s (%s, %d files) in async %s runtime in %.3fs",
                skill.name,
                scanned.digest[:12],
                len(scanned.files),
                self.name,
                time.monotonic() - started,
            )
            return prepared

    def _activate(self, skill_name: str, config: SkillRuntimeConfig) -> None:
        with self._lock:
            self._skill_environment.pop(skill_name, None)
            self._skill_environment[skill_name] = dict(config.environment)

    async def _place(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        try:
            await self._place_skill(skill, files, target)
        except Exception as exc:
            failure = place_failure(skill, self.name, exc)
            if failure is exc:
                raise
            raise failure from exc

    async def _bootstrap(self, prepared: Skill, config: SkillRuntimeConfig) -> None:
        try:
            await run_bootstrap_async(self, prepared, config)
        except Exception as exc:
            failure = bootstrap_transport_failure(prepared, self.name, exc)
            if failure is exc:
                raise
            raise failure from exc
