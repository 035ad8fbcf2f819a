"""The async SPI: :class:`AsyncSkillRuntime` and the shared base :class:`AsyncBaseSkillRuntime`.

The source of :mod:`skillruntime.core.runtime.spi`, which ``scripts/generate_sync.py`` writes
from it: the same method names and contracts (``docs/architecture.md``, "Contracts"), as
coroutines, with ``async with`` instead of ``with``. Both bases follow the rules of
:mod:`skillruntime.core.runtime.rules` (working directory, environment precedence, digest cache,
preparation steps, bootstrap errors);
single-flight per skill takes an :class:`asyncio.Lock` here, a :class:`threading.Lock` there.

**Any event loop.** An async runtime object serves whichever event loop awaits it, one after
the other (a program calling :func:`asyncio.run` per request): it keeps no loop-bound object
(lock, connection pool, future) from one loop for use on another.
:class:`~skillruntime.core.runtime.loop_local.LoopLocal` holds one such object per loop.

**Cancellation is a contract.** Cancelling a task that awaits :meth:`AsyncSkillRuntime.execute`
(directly or through :func:`asyncio.timeout`) stops the command — the whole process tree, locally
or in the sandbox — before the :class:`asyncio.CancelledError` propagates, and the runtime stays
usable. A cancelled :meth:`AsyncSkillRuntime.prepare` caches nothing, so the next call retries.
"""

from __future__ import annotations

if False:  # unasync: sync docstring
    """The ``SkillRuntime`` SPI and the shared machinery most backends build on.

    :class:`SkillRuntime` is the contract (``docs/architecture.md``, "Contracts").
    :class:`BaseSkillRuntime` implements the parts that are the same everywhere — preparation
    with a content-digest cache and per-skill locks, the bootstrap runner, environment merging,
    conversation workspaces, closed-state checks — and leaves a backend a handful of hooks: run
    one command, provide a raw file system, place a skill's files.
    """

import asyncio
import logging
import posixpath
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

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
from .async_scoped import AsyncScopedFileSystem
from .closing import AsyncCloseable
from .loop_local import LoopLocal
from .rules import (
    BOOTSTRAP_OUTPUT_TAIL,
    Bootstrap,
    CheckReady,
    MarkReady,
    PlaceFiles,
    PreparedSkill,
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
    ready_marker_path,
    scan_skill,
)
from .workspace import ConversationWorkspace

__all__ = [
    "BOOTSTRAP_OUTPUT_TAIL",
    "AsyncBaseSkillRuntime",
    "AsyncSkillRuntime",
    "PreparedSkill",
    "ready_marker_path",
    "run_bootstrap_async",
]
if True:  # unasync: async
    __all__ += ["LoopLocal"]

logger = logging.getLogger(__name__)


class AsyncSkillRuntime(AsyncCloseable, ABC):
    """Where skill commands run and skill files live, for asyncio programs.

    An async context manager, safe to use from many tasks of one event loop and from one event
    loop after another. See ``docs/architecture.md`` ("Contracts") for the contracts every
    implementation must meet, plus the cancellation rule of this module; the conformance kit
    checks them.
    """

    if False:  # unasync: sync docstring
        """Where skill commands run and skill files live.

        A runtime is a context manager and is safe to call from several threads. See
        ``docs/architecture.md`` ("Contracts") for the contracts every implementation must meet;
        the conformance kit checks them.
        """

    @property
    @abstractmethod
    def name(self) -> str:
        """Stable runtime name (``local``, ``opensandbox``, ``aio``, …)."""

    @property
    @abstractmethod
    def default_working_directory(self) -> str:
        """Working directory of commands that name none; the default root of file searches.

        An absolute path. Relative file paths and relative working directories resolve against
        it, with or without a conversation. The runtime creates it on first use.
        """

    @abstractmethod
    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        """Make the skills available in the runtime; same count and order, new objects.

        Each returned ``base_path`` is a runtime path that exists. Bootstrap commands run after the
        copy; a skill counts as prepared only when all of them succeeded.
        """

    if True:  # unasync: async

        @abstractmethod
        async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
            """Run one shell command; a non-zero exit or a timeout is a result, not an exception.

            Cancelling the awaiting task kills the command's process tree.
            """

    else:  # unasync: sync

        @abstractmethod
        def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
            """Run one shell command; a non-zero exit or a timeout is a result, not an exception."""

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

    The runtime adds its merged environment. The first command that exits non-zero or times out
    stops the run with :class:`~skillruntime.core.errors.SkillPrepareError` carrying its exit code
    and output tail.
    """
    for index, step, request in bootstrap_requests(skill, config):
        with audited("bootstrap", skill_name=skill.name, **audit_fields(runtime)) as record:
            result = record.result(await runtime.execute(request))
        failure = bootstrap_failure(skill, index, step, result)
        if failure is not None:
            raise failure


class AsyncBaseSkillRuntime(RuntimeState, AsyncSkillRuntime):
    """Shared implementation of the SPI; a backend supplies a few hooks.

    Hooks: :meth:`_run` (one command with the final cwd and environment overlay),
    :meth:`_raw_file_system`, :meth:`_close_resources`, and optionally :meth:`_place_skill`,
    :meth:`_is_ready`, :meth:`_mark_ready`, :meth:`_scan_skill`, :meth:`_skills_root` and
    :meth:`_check_real_path`. In the async base the hooks that do I/O are coroutines.

    Environment precedence, lowest first: ``base_environment``, the configs of prepared skills
    (in preparation order), the request's environment.

    Relative file paths and working directories are resolved here, before any hook sees them:
    under the conversation workspace when there is one, else against
    :attr:`default_working_directory` (lexically). Hooks always receive absolute paths.
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
        self._lock = threading.RLock()
        self._closed = False
        self._prepared: dict[PrepareKey, PreparedSkill] = {}
        if True:  # unasync: async
            self._prepare_locks: LoopLocal[dict[PrepareKey, asyncio.Lock]] = LoopLocal(dict)
        else:  # unasync: sync
            self._prepare_locks: dict[PrepareKey, threading.Lock] = {}
        self._skill_environment: dict[str, dict[str, str]] = {}
        self._file_system: AsyncScopedFileSystem | None = None

    # ------------------------------------------------------------------ hooks

    @abstractmethod
    async def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        """Run ``request.command`` in ``working_directory`` with ``environment`` added on top of
        the backend's own process environment; enforce timeout and output bounds (and, async,
        kill the process tree when cancelled)."""

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
        """Extra check applied to every scoped path (for example a symlink check); the local
        runtime confines paths in its file system instead, race-free."""
        return path

    async def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Copy or upload the skill's files into the runtime directory ``target``.

        The default creates ``target`` and calls ``upload_files`` on the raw file system (one
        request per file unless the backend overrides it).
        """
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
        """True when a complete prepared copy already exists at ``target`` (left by an earlier
        runtime object on the same workspace)."""
        return await self._raw_file_system().exists(ready_marker_path(target))

    async def _mark_ready(self, target: str, *, digest: str) -> None:
        """Record that the copy at ``target`` is complete and bootstrapped; called once per
        prepared copy, after its upload and bootstrap succeeded. ``digest`` is the one naming
        the copy (:func:`~skillruntime.core.skills.files.prepared_copy_digest`: its content and
        the bootstrap commands run in it)."""
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
            # Checked again: a request built without validation must not smuggle bad names.
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

    def _scan_skill(self, skill: Skill) -> ScannedSkill:
        """Walk and digest ``skill``'s source under the upload policy (the first step of a
        prepare; the async base runs it in a worker thread). A runtime may override it to do
        more in the same pass, e.g. copy the files while hashing them; it raises what
        :func:`~skillruntime.core.runtime.rules.scan_skill` raises."""
        return scan_skill(skill, self._upload_policy)

    async def _prepare_one(self, skill: Skill, config: SkillRuntimeConfig) -> Skill:
        with audited("prepare", skill_name=skill.name, **self._audit_fields()) as record:
            if True:  # unasync: async
                scanned = await asyncio.to_thread(self._scan_skill, skill)
            else:  # unasync: sync
                scanned = self._scan_skill(skill)
            record.skill_digest = scanned.digest
            return await self._prepare_scanned(skill, config, scanned)

    async def _prepare_scanned(
        self, skill: Skill, config: SkillRuntimeConfig, scanned: ScannedSkill
    ) -> Skill:
        key = prepare_key(skill, scanned.digest, config)
        with self._lock:
            if True:  # unasync: async
                lock = self._prepare_locks.get().setdefault(key, asyncio.Lock())
            else:  # unasync: sync
                lock = self._prepare_locks.setdefault(key, threading.Lock())
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
                "prepared skill %s (%s, %d files) in %s runtime in %.3fs",
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
