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
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx

from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.exceptions import (
    SandboxApiException,
    SandboxConnectionException,
    SandboxTimeoutException,
)
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
from skillruntime.core.errors import RuntimeFileError, SkillPrepareError, SkillRuntimeError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillRuntimeConfig,
)
from skillruntime.core.observability.audit import audited
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
from .errors import OpenSandboxError, OpenSandboxExecutionError, SandboxReplacedError
from .files import OpenSandboxFileSystem
from .options import (
    DEFAULT_CONVERSATIONS_ROOT,
    DEFAULT_IMAGE,
    DEFAULT_REMOTE_ROOT,
    NetworkPolicyOptions,
)
from .retry import DEFAULT_RETRY_SECONDS
from .sandbox import (
    ENDED_STATES,
    SandboxClient,
    SandboxGoneError,
    SandboxSettings,
)

__all__ = ["OpenSandboxSkillRuntime", "shared_memory_store"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SHARED_STORE = InMemoryConversationStore()
_ACQUIRE_ATTEMPTS = 8
_LIST_PAGE = 500
PREPARE_ATTEMPTS = 3
_FILE_NOT_FOUND = "FILE_NOT_FOUND"
_CONVERSATION_KEY = "skillruntime-conversation-key"
_ROLE = "skillruntime-role"
_ROLE_CANDIDATE = "candidate"
_ROLE_RECORDED = "conversation"
DEFAULT_ORPHAN_GRACE_SECONDS = 300.0
"""Age after which an unrecorded candidate sandbox of a conversation counts as orphaned."""


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


def may_mean_sandbox_gone(exc: BaseException) -> bool:
    """True for failures a vanished sandbox produces (not a missing file)."""
    if isinstance(exc, SandboxConnectionException | SandboxTimeoutException | httpx.TransportError):
        return True
    if isinstance(exc, SandboxApiException):
        code = exc.error.code if exc.error is not None else None
        if code == _FILE_NOT_FOUND:
            return False
        return exc.status_code in {404, 410, 502, 503}
    return False


class SandboxReplacedWhilePreparingError(SkillPrepareError):
    """The sandbox a skill was being prepared in vanished (or stopped being the conversation's);
    the preparation starts again from the beginning on the replacement."""

    def __init__(self, sandbox_id: str) -> None:
        super().__init__(f"sandbox {sandbox_id} was replaced while a skill was being prepared")
        self.sandbox_id = sandbox_id


def replaced_too_often(skill: Skill) -> SkillPrepareError:
    """The error of a preparation whose sandbox was replaced at every attempt."""
    return SkillPrepareError(
        f"Preparing skill '{skill.name}' failed: its sandbox was replaced "
        f"{PREPARE_ATTEMPTS} times while the skill was being uploaded or bootstrapped; "
        "nothing was recorded, prepare it again",
        skill_name=skill.name,
    )


def replaced_error(sandbox_id: str) -> SandboxReplacedError:
    """The error of a command whose sandbox vanished while it ran."""
    return SandboxReplacedError(
        f"The sandbox {sandbox_id} vanished while the command ran; the command died with it "
        "and was not retried. The next call uses a replacement sandbox, which holds none of "
        "the earlier files: prepare the skills again and re-run the command if it is safe",
        sandbox_id=sandbox_id,
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
    ) -> None:
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
        self._orphan_grace_seconds = orphan_grace_seconds
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
        self._sandbox: SandboxSync | None = None
        self._last_sandbox_id: str | None = None
        self._sandbox_lock = threading.RLock()
        self._pin = threading.local()  # the sandbox the current thread's prepare is bound to
        self._record: ConversationRecord | None = None
        self._ready_targets: set[str] = set()
        self._owns_store = isinstance(conversation_store, str)
        self._binding: ConversationBinding | None = None
        if workspace is not None:
            store = resolve_conversation_store(conversation_store, _SHARED_STORE)
            self._binding = ConversationBinding(
                store,
                service_key=service_key_for_url(self._config.get_base_url()),
                conversation_id=workspace.conversation_id,
                runtime_name=self.name,
                workspace_root=workspace.conversations_root,
            )
            self._guard = ConversationGuard(
                store,
                self._binding.storage_key,
                description=f"conversation {workspace.conversation_id}",
                exclusive=exclusive,
                lease_ttl_seconds=lease_ttl_seconds,
                lease_wait_seconds=lease_wait_seconds,
                activity_interval_seconds=activity_interval_seconds,
            )

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return "opensandbox"

    @property
    def default_working_directory(self) -> str:
        return self._workspace.directory if self._workspace else self._remote_root

    @property
    def sandbox_id(self) -> str | None:
        """Id of the sandbox this runtime is attached to (``None`` before first use)."""
        with self._sandbox_lock:
            return self._sandbox.id if self._sandbox is not None else None

    @property
    def conversation_record(self) -> ConversationRecord | None:
        """The conversation record as last read or written by this runtime."""
        return self._record

    @property
    def conversation_record_key(self) -> str | None:
        """Storage key of the conversation record (``None`` without a conversation)."""
        return self._binding.storage_key if self._binding is not None else None

    @property
    def file_requests(self) -> int:
        """File-API requests sent so far (diagnostics, benchmarks)."""
        return self._files.requests

    def destroy_conversation_sandbox(self) -> None:
        """End the conversation's sandbox: delete its record first, then kill it.

        Call it when the conversation is over, not after each turn. Without a record and without
        a local sandbox nothing is killed and no record is created. An exclusive runtime does it
        under the conversation's lease (waiting for it like any operation).
        """
        if self._binding is None:
            raise OpenSandboxError("destroy_conversation_sandbox() needs a conversation_id")
        with self.exclusive_session():
            self._destroy_recorded_sandbox(self._binding)

    def _destroy_recorded_sandbox(self, binding: ConversationBinding) -> None:
        removed = binding.delete()
        with self._sandbox_lock:
            local, self._sandbox = self._sandbox, None
            self._record = None
        with self._lock:
            self._prepared.clear()
        target = removed.sandbox_id if removed is not None and removed.sandbox_id else None
        if target is None and local is not None:
            target = local.id
        try:
            if target is not None:
                # The kill would cut the streams still being read (see _close_resources).
                self._runner.wait_for_drains()
                self._client.kill(target)
        finally:
            self._client.release(local)
            if self.closed:
                self._client.close()

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

    def _pinned_call(self, sandbox: SandboxSync, call: Callable[[], T]) -> T:
        """Run ``call`` with ``sandbox`` pinned for the current thread (the async runtime runs
        record reads and writes of one preparation this way, in a worker thread)."""
        previous = self._pinned()
        self._pin.sandbox = sandbox
        try:
            return call()
        finally:
            self._pin.sandbox = previous

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
            if exc.__cause__ is None or not self._recover(sandbox, exc.__cause__):
                raise
            if pinned is not None:
                raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
            logger.warning("sandbox %s vanished before a command started; re-attaching", sandbox.id)
            return self._run_in(self._handle(), request, working_directory, environment)
        except OpenSandboxExecutionError as exc:
            if self._vanished(sandbox, patient=True):
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
            and self._vanished(sandbox, patient=True)
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
        return self._workspace.skills_directory if self._workspace else self._remote_root

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
            if exc.__cause__ is not None and self._recover(sandbox, exc.__cause__):
                raise SandboxReplacedWhilePreparingError(sandbox.id) from exc
            raise

    def _is_ready(self, target: str) -> bool:
        if self._binding is None:
            with self._lock:
                return target in self._ready_targets
        pinned = self._pinned()
        sandbox = pinned if pinned is not None else self._handle()
        record = self._record
        if (
            record is not None
            and record.sandbox_id == sandbox.id
            and target in record.prepared_skills.values()
        ):
            return True
        fresh = self._binding.load()
        if fresh is None or fresh.sandbox_id != sandbox.id:
            return False
        self._record = fresh
        return target in fresh.prepared_skills.values()

    def _mark_ready(self, target: str, *, digest: str) -> None:
        """Record the copy as prepared in the pinned sandbox, and only there.

        Raises :class:`SandboxReplacedWhilePreparingError` when that sandbox is no longer the
        live one (private mode) or no longer the one the record names (conversation mode): the
        files and bootstrap steps did not all reach the sandbox that would be recorded.
        """
        pinned = self._pinned()
        sandbox = pinned if pinned is not None else self._handle()
        if self._binding is None:
            with self._sandbox_lock:
                if self._sandbox is not sandbox:
                    raise SandboxReplacedWhilePreparingError(sandbox.id)
                with self._lock:
                    self._ready_targets.add(target)
            return
        updated = self._binding.add_prepared(sandbox.id, digest, target)
        if updated is None or updated.sandbox_id != sandbox.id:
            # Another node replaced the sandbox: follow the record from the next call on.
            with self._sandbox_lock:
                if self._sandbox is sandbox:
                    self._sandbox = None
            self._client.release(sandbox)
            raise SandboxReplacedWhilePreparingError(sandbox.id)
        self._record = updated

    def _close_resources(self) -> None:
        with self._sandbox_lock:
            sandbox, self._sandbox = self._sandbox, None
        try:
            # The streams still being read end first. A conversation's sandbox runs on, and
            # cutting a stream execd has not ended yet would make it kill every command running
            # there (see .commands); a private one is killed next, and its execd dies with it,
            # cutting the stream, which the SDK logs at ERROR with the httpx traceback. A
            # blocking read cannot be stopped without such an error, so the wait is execd's
            # linger after a command's final event (about a second, at most DRAIN_WAIT_SECONDS).
            self._runner.wait_for_drains()
            if sandbox is not None and self._binding is None:
                try:
                    self._client.kill(sandbox.id)
                except OpenSandboxError:
                    logger.warning("killing sandbox %s at close failed", sandbox.id, exc_info=True)
        finally:
            self._client.release(sandbox)
            self._client.close()
            if self._owns_store and self._binding is not None:
                self._binding.store.close()

    # ------------------------------------------------------------- sandbox

    def _handle(self) -> SandboxSync:
        """The live sandbox, created or attached on first use."""
        with self._sandbox_lock:
            self._ensure_open()
            if self._sandbox is None:
                sandbox = self._acquire()
                try:
                    self._ensure_workspace(sandbox)
                except BaseException:
                    self._client.release(sandbox)
                    raise
                if self._last_sandbox_id is not None and self._last_sandbox_id != sandbox.id:
                    with self._lock:  # a new sandbox holds none of the earlier copies
                        self._prepared.clear()
                        self._ready_targets.clear()
                self._last_sandbox_id = sandbox.id
                self._sandbox = sandbox
            return self._sandbox

    def _metadata(self) -> dict[str, str]:
        """Metadata of a new sandbox; a conversation's starts as an untagged *candidate*."""
        data = {"skillruntime-runtime": self.name}
        if self._binding is not None:
            data["skillruntime-conversation-id"] = self._binding.conversation_id
            data[_CONVERSATION_KEY] = self._binding.storage_key
            data[_ROLE] = _ROLE_CANDIDATE
        return data

    def _attached(self, sandbox: SandboxSync, *, adopted: bool) -> SandboxSync:
        """Finish attaching ``sandbox``, the recorded one: tag it as the conversation's when this
        runtime just recorded it, then kill orphaned candidates. Neither step fails the attach."""
        if adopted:
            try:
                self._client.tag(sandbox.id, {_ROLE: _ROLE_RECORDED})
            except OpenSandboxError:
                logger.warning("tagging sandbox %s as recorded failed", sandbox.id, exc_info=True)
        try:
            self._kill_orphans(sandbox.id)
        except Exception:
            logger.warning("looking for orphaned candidate sandboxes failed", exc_info=True)
        return sandbox

    def _kill_orphans(self, recorded_id: str) -> None:
        """Kill the conversation's candidate sandboxes that no record names and that are older
        than ``orphan_grace_seconds`` (left by a node that died before recording or discarding
        its candidate).

        A sandbox counts only when it carries every tag of this runtime's candidates (this
        conversation's key and id, the role, the runtime and the deployment's own ``metadata``)
        at exactly their values, checked on the client whatever the server's filter returned;
        and it is never killed while any record of the store names it (this conversation's is
        read again before each kill). When the store cannot list its records, nothing is
        killed."""
        binding = self._binding
        assert binding is not None
        tagged = self._client.list_tagged(
            {**self._client.settings.metadata, **self._metadata(), _ROLE: _ROLE_CANDIDATE}
        )
        now = datetime.now(UTC)
        stale = []
        for sandbox_id, created_at in tagged:
            if sandbox_id == recorded_id:
                continue
            if created_at is not None:
                created = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
                if (now - created).total_seconds() < self._orphan_grace_seconds:
                    continue
            stale.append(sandbox_id)
        if not stale:
            return
        recorded = self._recorded_sandbox_ids(binding.store)
        for sandbox_id in stale:
            record = binding.load()
            if record is not None and record.sandbox_id == sandbox_id:
                continue
            if recorded is None or sandbox_id in recorded:
                logger.warning(
                    "not killing candidate sandbox %s of conversation %s: %s",
                    sandbox_id,
                    binding.conversation_id,
                    "the store cannot list its records"
                    if recorded is None
                    else "a conversation record names it",
                )
                continue
            logger.warning(
                "killing orphaned candidate sandbox %s of conversation %s",
                sandbox_id,
                binding.conversation_id,
            )
            self._client.kill(sandbox_id)

    @staticmethod
    def _recorded_sandbox_ids(store: ConversationStore) -> set[str] | None:
        """The sandbox ids every record of ``store`` names, or ``None`` when it cannot list."""
        ids: set[str] = set()
        after: str | None = None
        try:
            while True:
                batch = store.list_records(after=after, limit=_LIST_PAGE)
                ids.update(record.sandbox_id for record in batch if record.sandbox_id)
                if len(batch) < _LIST_PAGE:
                    return ids
                after = batch[-1].storage_key
        except SkillRuntimeError:
            logger.warning("listing the conversation records failed", exc_info=True)
            return None

    def _acquire(self) -> SandboxSync:
        binding = self._binding
        if binding is None:
            return self._client.create(self._metadata())
        for _ in range(_ACQUIRE_ATTEMPTS):
            record = binding.load()
            if record is None:
                candidate = self._client.create(self._metadata())
                try:
                    won = binding.create(candidate.id) or self._recorded(candidate)
                except BaseException:
                    self._discard_unless_recorded(candidate)
                    raise
                if won:
                    try:
                        self._record = binding.load()
                    except BaseException:
                        self._client.release(candidate)  # recorded: the sandbox stays
                        raise
                    logger.info(
                        "conversation %s now uses sandbox %s", binding.conversation_id, candidate.id
                    )
                    return self._attached(candidate, adopted=True)
                self._discard(candidate)
                continue
            if record.sandbox_id is None:
                replaced = self._replace(None)
                if replaced is not None:
                    return replaced
                continue
            try:
                sandbox = self._client.connect(record.sandbox_id)
            except SandboxGoneError:
                logger.warning(
                    "sandbox %s of conversation %s is gone; replacing it",
                    record.sandbox_id,
                    binding.conversation_id,
                )
                replaced = self._replace(record.sandbox_id)
                if replaced is not None:
                    return replaced
                continue
            try:
                self._client.renew(sandbox)
            except SandboxGoneError:
                self._client.release(sandbox)
                replaced = self._replace(record.sandbox_id)
                if replaced is not None:
                    return replaced
                continue
            except BaseException:
                self._client.release(sandbox)
                raise
            self._record = record
            return self._attached(sandbox, adopted=False)
        raise OpenSandboxError(
            f"the record of conversation {binding.conversation_id} kept changing while attaching "
            f"to its sandbox ({_ACQUIRE_ATTEMPTS} attempts)"
        )

    def _replace(self, old_id: str | None) -> SandboxSync | None:
        """:meth:`_replace_sandbox`, audited as ``sandbox.replace`` (with the new sandbox's id)."""
        fields = self._audit_fields()
        fields.pop("sandbox_source")
        with audited("sandbox.replace", **fields) as record:
            replaced = self._replace_sandbox(old_id)
            record.sandbox_id = replaced.id if replaced is not None else None
            return replaced

    def _replace_sandbox(self, old_id: str | None) -> SandboxSync | None:
        """Create a sandbox and swap it into the record; ``None`` when another node won."""
        assert self._binding is not None
        candidate = self._client.create(self._metadata())
        try:
            updated = self._binding.replace_sandbox(old_id, candidate.id)
            if updated is None:
                if self._binding.create(candidate.id) or self._recorded(candidate):
                    self._record = self._binding.load()
                    return self._attached(candidate, adopted=True)
            elif updated.sandbox_id == candidate.id:
                self._record = updated
                return self._attached(candidate, adopted=True)
        except BaseException:
            self._discard_unless_recorded(candidate)
            raise
        self._discard(candidate)
        return None

    def _recorded(self, candidate: SandboxSync) -> bool:
        """Whether the stored record names ``candidate`` (a store may report a write as failed
        or lost although it landed, e.g. when the acknowledgement of a commit is lost)."""
        assert self._binding is not None
        record = self._binding.load()
        return record is not None and record.sandbox_id == candidate.id

    def _discard_unless_recorded(self, candidate: SandboxSync) -> None:
        """After a failed record write: kill ``candidate`` unless the record names it after all.

        Killing a candidate the record does name would leave the conversation on a dead sandbox
        (every node would then replace it). When the record cannot be read either, the
        candidate is killed: an unrecorded sandbox would otherwise run until it expires.
        """
        try:
            kept = self._recorded(candidate)
        except Exception:
            logger.warning(
                "cannot tell whether candidate sandbox %s was recorded; killing it",
                candidate.id,
                exc_info=True,
            )
            kept = False
        if kept:
            logger.warning(
                "the record names sandbox %s although writing it failed; keeping the sandbox",
                candidate.id,
            )
            self._client.release(candidate)
            return
        self._discard(candidate)

    def _discard(self, candidate: SandboxSync) -> None:
        """Kill a losing candidate sandbox and close its handle."""
        try:
            self._client.kill(candidate.id)
        except OpenSandboxError:
            logger.warning(
                "killing losing candidate sandbox %s failed", candidate.id, exc_info=True
            )
        finally:
            self._client.release(candidate)

    def _ensure_workspace(self, sandbox: SandboxSync) -> None:
        """Create the workspace (or remote root) once per sandbox.

        It is the first execd request on a freshly attached sandbox, and creating directories
        is idempotent, so transient failures are retried like every other file call.
        """
        if self._binding is None:
            directory = self._remote_root
        else:
            record = self._record
            if record is not None and record.sandbox_id == sandbox.id and record.workspace_ready:
                return
            assert self._workspace is not None
            directory = self._workspace.directory
        self._files.make_directories([directory], sandbox=sandbox)
        if self._binding is not None:
            updated = self._binding.mark_workspace_ready(sandbox.id)
            if updated is not None:
                self._record = updated

    def _recover(self, sandbox: SandboxSync, exc: BaseException) -> bool:
        """After a failure: if ``sandbox`` has vanished, drop the handle and return ``True``.

        The next use then re-attaches through the record, which replaces the sandbox.
        """
        return may_mean_sandbox_gone(exc) and self._vanished(sandbox)

    def _vanished(self, sandbox: SandboxSync, *, patient: bool = False) -> bool:
        """Ask the server whether ``sandbox`` has ended; if so drop the handle.

        One attempt, no retries, for callers inside a retry budget of their own; ``patient``
        (after a command came back killed, where no budget is running) retries a server that is
        still coming back for ``retry_seconds``. ``False`` when the server cannot be asked.
        """
        try:
            state = self._client.state(sandbox.id, deadline=None if patient else time.monotonic())
        except OpenSandboxError:
            return False
        if state is not None and state.lower() not in ENDED_STATES:
            return False
        logger.warning("sandbox %s has vanished (state %s)", sandbox.id, state or "unknown")
        with self._sandbox_lock:
            if self._sandbox is sandbox:
                self._sandbox = None
        self._client.release(sandbox)
        return True
