"""``OpenSandboxSkillRuntime``: skill commands and files in an OpenSandbox sandbox.

Building the runtime contacts nothing; the sandbox is created (or, for a conversation, found) on
the first prepare, execute or file call.

* **Without a conversation** the runtime owns a private sandbox: skills go to ``remote_root``
  (the default working directory) and :meth:`close` kills the sandbox.
* **With a conversation** (``conversation_id``) the sandbox belongs to the conversation and is
  recorded in a :class:`~skillruntime.core.conversations.ConversationStore` shared by every
  process that serves it. The workspace ``<conversations_root>/<id>`` scopes files and working
  directories. The record is read on first use: a stored sandbox is connected, health-checked and
  renewed, and the skills it already holds are known, so nothing is uploaded twice across nodes or
  restarts. Without a stored sandbox a candidate is created and the record inserted; a node that
  loses that race kills its candidate and joins the winner's (a candidate the record names after
  all, because the store reported a write as failed that did land, is kept, never killed). A
  stored sandbox that no longer exists is replaced and the record updated; one that exists but
  cannot be reached raises :class:`~.errors.SandboxUnavailableError` and leaves the record
  alone. :meth:`close` only releases the local handle; :meth:`destroy_conversation_sandbox` ends
  the conversation's sandbox (record deleted first, then the kill).

A skill is prepared in one pinned sandbox: its uploads, bootstrap commands and record entry all
go there, and when that sandbox vanishes midway the preparation starts again from the beginning
in the replacement, so no record lists a skill whose files or bootstrap steps went elsewhere. A
candidate sandbox carries the metadata ``skillruntime-role=candidate`` until the record names it
(then ``conversation``); attaching kills the conversation's candidates that no record names once
they are older than ``orphan_grace_seconds`` (left by a process that died in between). A
command whose sandbox vanished under it raises :class:`~.errors.SandboxReplacedError`.
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule
from opensandbox.sync.sandbox import SandboxSync
from opensandbox.transport import RetryPolicy
from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
    service_key_for_url,
)
from skillruntime.core.conversations.binding import (
    ConversationBinding,
    check_conversation_arguments,
    resolve_conversation_store,
)
from skillruntime.core.conversations.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ConversationGuard,
    ExclusiveRuntimeMixin,
)
from skillruntime.core.conversations.leases import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_LEASE_WAIT_SECONDS,
)
from skillruntime.core.conversations.sandboxes import DEFAULT_ORPHAN_GRACE_SECONDS
from skillruntime.core.durability.automatic import Durability, DurableWorkspace
from skillruntime.core.errors import RuntimeFileError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillRuntimeConfig,
)
from skillruntime.core.runtime.spi import BaseSkillRuntime
from skillruntime.core.runtime.workspace import ConversationWorkspace, validate_remote_root
from skillruntime.core.skills.files import (
    DEFAULT_UPLOAD_POLICY,
    SkillFile,
    UploadPolicy,
)

from ._tls import connection_config as default_connection_config
from .commands import (
    DEFAULT_DEADLINE_GRACE_SECONDS,
    CommandNotStartedError,
    CommandOutcomeUnknownError,
    CommandRunner,
)
from .errors import OpenSandboxError, OpenSandboxExecutionError
from .files import OpenSandboxFileSystem
from .keeper import (
    PREPARE_ATTEMPTS,
    RUNTIME_NAME,
    SandboxKeeper,
    SandboxReplacedWhilePreparingError,
    may_mean_sandbox_gone,
    replaced_error,
    replaced_too_often,
)
from .options import (
    DEFAULT_CONVERSATIONS_ROOT,
    DEFAULT_IMAGE,
    DEFAULT_REMOTE_ROOT,
    NetworkPolicyOptions,
)
from .pool import DEFAULT_POOL_TTL_SECONDS, OpenSandboxPool, opensandbox_pool
from .retry import DEFAULT_RETRY_SECONDS
from .sandbox import SandboxClient, SandboxSettings

__all__ = [
    "DEFAULT_ORPHAN_GRACE_SECONDS",
    "PREPARE_ATTEMPTS",
    "OpenSandboxSkillRuntime",
    "SandboxReplacedWhilePreparingError",
    "may_mean_sandbox_gone",
    "replaced_error",
    "replaced_too_often",
    "shared_memory_store",
]

logger = logging.getLogger(__name__)

_SHARED_STORE = InMemoryConversationStore()


def shared_memory_store() -> InMemoryConversationStore:
    """The process-wide in-memory store used when a conversation names no store."""
    return _SHARED_STORE


def _network_policy(
    policy: NetworkPolicyOptions | NetworkPolicy | Mapping[str, Any] | None,
) -> NetworkPolicy | None:
    if policy is None or isinstance(policy, NetworkPolicy):
        return policy
    options = (
        policy
        if isinstance(policy, NetworkPolicyOptions)
        else NetworkPolicyOptions.model_validate(policy)
    )
    return NetworkPolicy(
        defaultAction=options.default_action,
        egress=[NetworkRule(action=rule.action, target=rule.target) for rule in options.egress],
    )


class OpenSandboxSkillRuntime(ExclusiveRuntimeMixin, BaseSkillRuntime):
    """Runs skills in an OpenSandbox sandbox; see the module docs for the two modes.

    ``domain``/``api_key`` fall back to ``OPEN_SANDBOX_DOMAIN``/``OPEN_SANDBOX_API_KEY``.
    ``conversation_store`` is a store or a URL (``sqlite:///…``, ``postgresql+psycopg://…``,
    ``mysql+pymysql://…``); a store built from a URL is closed with the runtime. Without one a
    process-wide in-memory store is used. ``uid``/``gid`` run commands as a non-root user.
    ``connection_config`` replaces the SDK connection settings entirely (advanced).
    ``orphan_grace_seconds`` is the age after which a conversation's candidate sandbox that no
    record names is killed when a runtime attaches (see the module docs).
    ``exclusive=True`` (conversation mode) makes every prepare, execute and file operation hold
    the conversation's lease in the store, so nodes sharing the conversation take turns (see
    :mod:`skillruntime.core.conversations.exclusive`); the record's ``updated_at`` is refreshed at
    most every ``activity_interval_seconds`` while the conversation is used (what sweeps measure).
    ``pool_size`` (default 0: off; conversation mode) serves new conversations from a warm pool
    of that many sandboxes per server, store and sandbox configuration, each unclaimed one
    ending after ``pool_ttl_seconds`` (:mod:`.pool`; docs/opensandbox-runtime.md, "Warm pools").
    """

    def __init__(
        self,
        *,
        domain: str | None = None,
        api_key: str | None = None,
        protocol: str = "http",
        request_timeout_seconds: float = 30.0,
        use_server_proxy: bool = False,
        image: str = DEFAULT_IMAGE,
        entrypoint: Sequence[str] | None = None,
        sandbox_timeout_seconds: float = 600.0,
        ready_timeout_seconds: float = 30.0,
        resources: Mapping[str, str] | None = None,
        base_environment: Mapping[str, str] | None = None,
        network_policy: NetworkPolicyOptions | NetworkPolicy | Mapping[str, Any] | None = None,
        metadata: Mapping[str, str] | None = None,
        remote_root: str = DEFAULT_REMOTE_ROOT,
        conversations_root: str = DEFAULT_CONVERSATIONS_ROOT,
        conversation_id: str | None = None,
        conversation_store: ConversationStore | str | None = None,
        uid: int | None = None,
        gid: int | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        deadline_grace_seconds: float = DEFAULT_DEADLINE_GRACE_SECONDS,
        connection_config: ConnectionConfigSync | None = None,
        orphan_grace_seconds: float = DEFAULT_ORPHAN_GRACE_SECONDS,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
        durability: Durability | None = None,
        pool_size: int = 0,
        pool_ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
    ) -> None:
        if durability is not None and conversation_id is None:
            raise ValueError("durability needs a conversation_id")
        if pool_size < 0:
            raise ValueError("pool_size must not be negative")
        workspace = (
            ConversationWorkspace(conversations_root, conversation_id)
            if conversation_id is not None
            else None
        )
        super().__init__(
            base_environment=base_environment, workspace=workspace, upload_policy=upload_policy
        )
        if not image.strip():
            raise ValueError("image must not be empty")
        if gid is not None and uid is None:
            raise ValueError("gid needs uid")
        self._remote_root = validate_remote_root(remote_root)
        check_conversation_arguments(
            conversation=workspace is not None,
            conversation_store=conversation_store,
            exclusive=exclusive,
            orphan_grace_seconds=orphan_grace_seconds,
        )
        self._config = connection_config or default_connection_config(
            domain=domain,
            api_key=api_key,
            protocol=protocol,
            request_timeout=timedelta(seconds=request_timeout_seconds),
            use_server_proxy=use_server_proxy,
            retry_policy=RetryPolicy.disabled(),
            disable_metrics=True,
        )
        self._client = SandboxClient(
            self._config,
            SandboxSettings(
                image=image,
                entrypoint=list(entrypoint) if entrypoint else None,
                sandbox_timeout_seconds=sandbox_timeout_seconds,
                ready_timeout_seconds=ready_timeout_seconds,
                resources=dict(resources or {}),
                environment=dict(self._base_environment),
                network_policy=_network_policy(network_policy),
                metadata=dict(metadata or {}),
                retry_seconds=retry_seconds,
                domain_configured=connection_config is not None
                or domain is not None
                or bool(os.environ.get("OPEN_SANDBOX_DOMAIN")),
            ),
        )
        self._client.audit_conversation_id = workspace.conversation_id if workspace else None
        self._runner = CommandRunner(
            uid=uid, gid=gid, deadline_grace_seconds=deadline_grace_seconds
        )
        self._files = OpenSandboxFileSystem(
            self._handle,
            retry_seconds=retry_seconds,
            recover=self._recover,
            owner=str(uid) if uid is not None else None,
            group=str(gid) if gid is not None else None,
            run_command=self._run_file_command,
        )
        self._last_sandbox_id: str | None = None
        self._pin = threading.local()  # the sandbox the current thread's prepare is bound to
        binding: ConversationBinding | None = None
        if workspace is not None:
            store = resolve_conversation_store(conversation_store, _SHARED_STORE)
            binding = ConversationBinding(
                store,
                service_key=service_key_for_url(self._config.get_base_url()),
                conversation_id=workspace.conversation_id,
                runtime_name=self.name,
                workspace_root=workspace.conversations_root,
                durable=durability is not None,
            )
            self._guard = ConversationGuard(
                store,
                binding.storage_key,
                description=f"conversation {workspace.conversation_id}",
                exclusive=exclusive,
                lease_ttl_seconds=lease_ttl_seconds,
                lease_wait_seconds=lease_wait_seconds,
                activity_interval_seconds=activity_interval_seconds,
            )
        self._pool: OpenSandboxPool | None = None
        if pool_size > 0 and binding is not None:
            self._pool = opensandbox_pool(
                self._config,
                self._client.settings,
                binding.store,
                conversation_store=conversation_store,
                size=pool_size,
                conversations_root=conversations_root,
                ttl_seconds=pool_ttl_seconds,
            )
        self._keeper = SandboxKeeper(
            self._client,
            binding=binding,
            workspace=workspace,
            remote_root=self._remote_root,
            make_directories=lambda directories, sandbox: self._files.make_directories(
                directories, sandbox=sandbox
            ),
            orphan_grace_seconds=orphan_grace_seconds,
            owns_store=isinstance(conversation_store, str),
            audit_fields=self._audit_fields,
            pool=self._pool,
        )
        self._durable = (
            DurableWorkspace(durability, conversation_id=binding.conversation_id, binding=binding)
            if durability is not None and binding is not None
            else None
        )
        self._closing = False

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return RUNTIME_NAME

    @property
    def default_working_directory(self) -> str:
        return self._workspace.directory if self._workspace else self._remote_root

    @property
    def sandbox_id(self) -> str | None:
        """Id of the sandbox this runtime is attached to (``None`` before first use)."""
        return self._keeper.sandbox_id

    @property
    def conversation_record(self) -> ConversationRecord | None:
        """The conversation record as last read or written by this runtime."""
        return self._keeper.record

    @property
    def conversation_record_key(self) -> str | None:
        """Storage key of the conversation record (``None`` without a conversation)."""
        binding = self._keeper.binding
        return binding.storage_key if binding is not None else None

    @property
    def keeper(self) -> SandboxKeeper:
        """The runtime's sandbox: lifecycle, workspace, prepared copies (:mod:`.keeper`)."""
        return self._keeper

    @property
    def connection_config(self) -> ConnectionConfigSync:
        """The SDK connection settings the runtime's clients use."""
        return self._config

    @property
    def file_requests(self) -> int:
        """File-API requests sent so far (diagnostics, benchmarks)."""
        return self._files.requests

    def destroy_conversation(self) -> None:
        """End the conversation's sandbox: delete its record first, then kill it.

        Call it when the conversation is over, not after each turn. Without a record and without
        a local sandbox nothing is killed and no record is created. An exclusive runtime does it
        under the conversation's lease (waiting for it like any operation).
        """
        if self._keeper.binding is None:
            raise OpenSandboxError("destroy_conversation() needs a conversation_id")
        with self.exclusive_session():
            with self._lock:
                self._prepared.clear()
            # The kill would cut the streams still being read (see _close_resources).
            self._keeper.destroy(before_kill=self._runner.wait_for_drains)
            if self._durable is not None:
                self._durable.forget()
            if self.closed:
                self._client.close()

    def destroy_conversation_sandbox(self) -> None:
        """The same as :meth:`destroy_conversation` (the name every container runtime shares)."""
        self.destroy_conversation()

    @property
    def pool(self) -> OpenSandboxPool | None:
        """The warm pool new conversations are served from (``None`` unless ``pool_size``)."""
        return self._pool

    @property
    def durable_workspace(self) -> DurableWorkspace | None:
        """The automatic snapshots and restores of this runtime (``None`` without
        ``durability``; docs/durability.md)."""
        return self._durable

    def close(self) -> None:
        """Snapshot a used conversation when ``durability`` asks for it (only in the sandbox
        this runtime is attached to: never one created for it), then close."""
        if self._durable is not None and not self._closed and self._keeper.current is not None:
            self._closing = True
            try:
                self._durable.closing(self)
            finally:
                self._closing = False
        super().close()

    # ----------------------------------------------------------------- hooks

    def _prepare_one(self, skill: Skill, config: SkillRuntimeConfig) -> Skill:
        """Prepare ``skill`` with every file and bootstrap step in one sandbox.

        The current sandbox is pinned for the whole preparation: uploads, bootstrap commands
        and the record entry all go to it. When it vanishes midway (or the record moves to
        another sandbox) nothing is recorded and the preparation starts again from the
        beginning on the replacement.
        """
        failure: SandboxReplacedWhilePreparingError | None = None
        for _ in range(PREPARE_ATTEMPTS):
            self._pin.sandbox = self._handle()
            try:
                return super()._prepare_one(skill, config)
            except SandboxReplacedWhilePreparingError as exc:
                failure = exc
                logger.warning(
                    "sandbox %s vanished while skill %s was being prepared; preparing it again "
                    "from the start in the replacement",
                    exc.sandbox_id,
                    skill.name,
                )
            finally:
                self._pin.sandbox = None
        raise replaced_too_often(skill) from failure

    def _pinned(self) -> SandboxSync | None:
        """The sandbox the current thread's preparation is bound to (``None`` outside one)."""
        pinned: SandboxSync | None = getattr(self._pin, "sandbox", None)
        return pinned

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        pinned = self._pinned()
        sandbox = pinned if pinned is not None else self._handle()
        try:
            result = self._run_in(sandbox, request, working_directory, environment)
        except CommandNotStartedError as exc:
            if exc.__cause__ is None or not self._keeper.recover(sandbox, exc.__cause__):
                raise
            if pinned is not None:
                raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
            logger.warning("sandbox %s vanished before a command started; re-attaching", sandbox.id)
            return self._run_in(self._handle(), request, working_directory, environment)
        except OpenSandboxExecutionError as exc:
            if self._keeper.vanished(sandbox, patient=True):
                if pinned is not None:
                    raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
                raise replaced_error(sandbox.id) from exc
            if isinstance(exc, CommandOutcomeUnknownError):
                # Held until the watchdog has ended the command (a lease with it).
                time.sleep(max(exc.ends_by - time.monotonic(), 0.0))
            raise
        if (
            result.exit_code == -1
            and not result.timed_out
            and self._keeper.vanished(sandbox, patient=True)
        ):
            # The command was killed with its sandbox (e.g. the server restarted).
            if pinned is not None:
                raise SandboxReplacedWhilePreparingError(sandbox.id)
            raise replaced_error(sandbox.id)
        return result

    def _run_file_command(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        """A command of the file system (its one-command search), from ``/``, with no
        environment."""
        return self._run(request, "/", {})

    def _run_in(
        self,
        sandbox: SandboxSync,
        request: SkillExecutionRequest,
        working_directory: str,
        environment: dict[str, str],
    ) -> SkillExecutionResult:
        return self._runner.run(
            sandbox,
            request.command,
            working_directory=working_directory,
            environment=environment,
            timeout_seconds=request.timeout_seconds,
            max_output_bytes=request.max_output_bytes,
        )

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self._files

    def _skills_root(self) -> str | None:
        return self._keeper.skills_root

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """Upload into ``target`` of the pinned sandbox: one directory request plus one request
        per batch of files, every batch to the same sandbox.

        Same digest means same bytes, so an earlier incomplete copy is simply overwritten.
        """
        pinned = self._pinned()
        sandbox = pinned if pinned is not None else self._handle()
        try:
            self._files.make_directories([target], sandbox=sandbox)
            self._files.upload_files(
                (
                    (item.local_path, posixpath.join(target, item.relative_path), item.executable)
                    for item in files
                ),
                sandbox=sandbox,
            )
        except RuntimeFileError as exc:
            if exc.__cause__ is not None and self._keeper.recover(sandbox, exc.__cause__):
                raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
            raise

    def _is_ready(self, target: str) -> bool:
        pinned = self._pinned()
        return self._keeper.is_ready(pinned if pinned is not None else self._handle(), target)

    def _mark_ready(self, target: str, *, digest: str) -> None:
        """Record the copy as prepared in the pinned sandbox, and only there
        (:meth:`.keeper.SandboxKeeper.mark_ready`)."""
        pinned = self._pinned()
        sandbox = pinned if pinned is not None else self._handle()
        self._keeper.mark_ready(sandbox, target, digest=digest)

    def _close_resources(self) -> None:
        # The streams still being read end first. A conversation's sandbox runs on, and cutting
        # a stream execd has not ended yet would make it kill every command running there (see
        # .commands); a private one is killed next, and its execd dies with it, cutting the
        # stream, which the SDK logs at ERROR with the httpx traceback. A blocking read cannot
        # be stopped without such an error, so the wait is execd's linger after a command's
        # final event (about a second, at most DRAIN_WAIT_SECONDS).
        self._keeper.close(before_kill=self._runner.wait_for_drains)

    # ------------------------------------------------------------- sandbox

    def _handle(self) -> SandboxSync:
        """The live sandbox, created or attached on first use (:meth:`.keeper.SandboxKeeper.
        attach`); a new sandbox holds none of the earlier copies."""
        self._ensure_open()
        if self._closing and self._keeper.current is None:
            raise OpenSandboxError(
                "the conversation's sandbox went away; no new one is made while closing"
            )
        sandbox = self._keeper.attach()
        if self._last_sandbox_id != sandbox.id:
            with self._lock:
                if self._last_sandbox_id is not None:
                    self._prepared.clear()
                self._last_sandbox_id = sandbox.id
            if self._durable is not None:
                self._durable.attached(sandbox.id)
        if self._durable is not None:
            self._durable.before(self)
        return sandbox

    def _recover(self, sandbox: SandboxSync, exc: BaseException) -> bool:
        """The file system's recovery (:meth:`.keeper.SandboxKeeper.recover`)."""
        return self._keeper.recover(sandbox, exc)
