"""``DockerSkillRuntime``: skill commands and files in a Docker container, one per conversation.

Building the runtime contacts nothing; the container is created (or, for a conversation, found)
on the first prepare, execute or file call.

* **Without a conversation** the runtime owns a private container: skills go to ``remote_root``
  (the default working directory) and :meth:`close` removes the container.
* **With a conversation** the container and a named volume belong to the conversation. The
  volume (``skillruntime-<key>``) is mounted at ``conversations_root`` and holds the workspace
  ``<conversations_root>/<id>``, so the files outlive any container. The container's id is kept
  in the conversation's record of a
  :class:`~skillruntime.core.conversations.ConversationStore`: a later runtime object, in this
  process or another one reaching the same engine, attaches to it. Without a record a candidate
  container is created and the record inserted; the loser of that race removes its candidate
  and joins the winner's. A recorded container that vanished is replaced by a new one on the same
  volume (prepared skills are bootstrapped again there) and the record updated. :meth:`close`
  only releases the local handle; :meth:`destroy_conversation` removes the record, the
  container and the volume.

Every container and volume carries labels: ``skillruntime-runtime=docker``, the conversation's
key and id (or ``skillruntime-role=private``) and the deployment's own ``labels``. Nothing is
removed unless it carries every one of them at exactly its value, checked on the client whatever
the engine's filter returned. On attach, the conversation's containers that no record names and
that are older than ``orphan_grace_seconds`` are removed (left by a process that died between
creating and recording its candidate).

A prepared copy is complete when its ready marker (next to it, in the volume) holds the id of the
container it was bootstrapped in: a replacement container bootstraps the copy again, a new
runtime object on the same container uploads nothing.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
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
from skillruntime.core.conversations.sandboxes import (
    DEFAULT_ORPHAN_GRACE_SECONDS,
    ROLE_CONVERSATION,
    ROLE_PRIVATE,
    TAG_CONVERSATION_ID,
    TAG_CONVERSATION_KEY,
    TAG_ROLE,
    TAG_RUNTIME,
    ConversationSandboxes,
    tags_match,
)
from skillruntime.core.durability.automatic import Durability, DurableWorkspace
from skillruntime.core.errors import SkillRuntimeError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillRuntimeConfig,
)
from skillruntime.core.observability.audit import audited
from skillruntime.core.runtime.rules import place_failure
from skillruntime.core.runtime.spi import BaseSkillRuntime, ready_marker_path
from skillruntime.core.runtime.workspace import ConversationWorkspace, validate_remote_root
from skillruntime.core.skills.files import DEFAULT_UPLOAD_POLICY, SkillFile, UploadPolicy

from .archive import ArchiveMemberError, DirectoryEntry, MemberReader, tar_stream
from .commands import CommandNotStartedError, CommandRunner
from .driver import DockerDriver
from .engine import (
    DockerEngine,
    acquire_shared_engine,
    engine_address,
    engine_service_key,
    release_shared_engine,
)
from .errors import ContainerReplacedError, DockerEngineError, DockerExecutionError
from .files import ContainerTarget, DockerFileSystem
from .options import (
    DEFAULT_CONVERSATIONS_ROOT,
    DEFAULT_CPUS,
    DEFAULT_IMAGE,
    DEFAULT_MEMORY,
    DEFAULT_PIDS_LIMIT,
    DEFAULT_REMOTE_ROOT,
)
from .pool import DEFAULT_POOL_TTL_SECONDS, DockerPool, docker_pool
from .security import ContainerSecurity, check_binds, engine_sockets, parse_memory

__all__ = [
    "DEFAULT_ORPHAN_GRACE_SECONDS",
    "LABEL_CONVERSATION_ID",
    "LABEL_CONVERSATION_KEY",
    "LABEL_ROLE",
    "LABEL_RUNTIME",
    "LABEL_VOLUME",
    "ROLE_CONVERSATION",
    "ROLE_PRIVATE",
    "RUNTIME_NAME",
    "DockerSkillRuntime",
    "labels_match",
    "shared_memory_store",
    "volume_name",
]

logger = logging.getLogger(__name__)

LABEL_RUNTIME = TAG_RUNTIME
LABEL_CONVERSATION_KEY = TAG_CONVERSATION_KEY
LABEL_CONVERSATION_ID = TAG_CONVERSATION_ID
LABEL_VOLUME = "skillruntime-volume"
LABEL_ROLE = TAG_ROLE
RUNTIME_NAME = "docker"

_SHARED_STORE = InMemoryConversationStore()
_FALLBACK_USER = (65534, 65534)
_MARKER_PREFIX = "container "
_USERS: dict[tuple[str, str, str | None], tuple[int, int]] = {}
"""The user an image resolves to, per engine, image and ``user`` option (read once per process:
the image's ``USER`` and ``/etc/passwd`` do not change under one name while it runs)."""
_USERS_LOCK = threading.Lock()
_TREE_BASES: dict[tuple[str, str, str], str] = {}
"""The deepest directory a new container of an image has on the way to ``remote_root``, per
engine, image and directory (found once per process, as :data:`_USERS`)."""


def shared_memory_store() -> InMemoryConversationStore:
    """The process-wide in-memory store used when a conversation names no store."""
    return _SHARED_STORE


def volume_name(storage_key: str) -> str:
    """The name of a conversation's volume (from its record's storage key)."""
    return f"skillruntime-{storage_key[:40]}"


labels_match = tags_match
"""Whether ``found`` carries every label of ``required`` at exactly its value."""


def _passwd_user(passwd: str, name: str | None) -> tuple[int, int] | None:
    """``(uid, gid)`` of account ``name`` in an ``/etc/passwd`` text, or (``name`` ``None``) of
    the first ordinary account (uid 1000–59999)."""
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) < 4 or not fields[2].isdigit() or not fields[3].isdigit():
            continue
        uid, gid = int(fields[2]), int(fields[3])
        if name is None and 1000 <= uid < 60000:
            return uid, gid
        if name is not None and fields[0] == name:
            return uid, gid
    return None


def _replaced(target: ContainerTarget) -> ContainerReplacedError:
    return ContainerReplacedError(
        f"The container {target.container_id[:12]} vanished while the command ran; the command "
        "died with it and was not retried. The next call uses a replacement container on the "
        "same volume",
        container_id=target.container_id,
    )


class DockerSkillRuntime(ExclusiveRuntimeMixin, BaseSkillRuntime):
    """Runs skills in a Docker container; see the module docs for the two modes.

    ``docker_host`` falls back to ``DOCKER_HOST`` (then the local socket). ``user`` is a name or
    ``uid[:gid]``; unset, the image's ``USER`` when it is not root, else the image's first
    ordinary account (uid 1000–59999), else ``65534:65534``; ``"root"`` asks for root. The
    isolation options (``network_mode``, ``cap_add``, ``pids_limit``, ``memory``, ``cpus``,
    ``read_only_root``, ``no_new_privileges``, ``binds``) are described in
    :mod:`.security`; a bind of the engine's socket is refused. ``labels`` tag every container
    and volume of this deployment. ``conversation_store`` is a store or a URL (one built from a
    URL is closed with the runtime); without one a process-wide in-memory store is used.
    ``exclusive=True`` holds the conversation's lease during every operation. ``pool_size``
    (default 0: off) serves new conversations from a warm pool of that many containers per
    deployment and image, each unclaimed one removed after ``pool_ttl_seconds``
    (:mod:`.pool`; docs/docker-runtime.md, "Warm pools").
    """

    def __init__(
        self,
        *,
        docker_host: str | None = None,
        api_version: str = "auto",
        request_timeout_seconds: float = 60.0,
        image: str = DEFAULT_IMAGE,
        user: str | None = None,
        network_mode: str = "none",
        cap_add: Sequence[str] = (),
        pids_limit: int = DEFAULT_PIDS_LIMIT,
        memory: str = DEFAULT_MEMORY,
        cpus: float = DEFAULT_CPUS,
        read_only_root: bool = False,
        no_new_privileges: bool = True,
        binds: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
        base_environment: Mapping[str, str] | None = None,
        remote_root: str = DEFAULT_REMOTE_ROOT,
        conversations_root: str = DEFAULT_CONVERSATIONS_ROOT,
        conversation_id: str | None = None,
        conversation_store: ConversationStore | str | None = None,
        upload_policy: UploadPolicy = DEFAULT_UPLOAD_POLICY,
        orphan_grace_seconds: float = DEFAULT_ORPHAN_GRACE_SECONDS,
        exclusive: bool = False,
        lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
        lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
        activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
        engine: DockerEngine | None = None,
        durability: Durability | None = None,
        pool_size: int = 0,
        pool_ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
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
        self._remote_root = validate_remote_root(remote_root)
        check_conversation_arguments(
            conversation=workspace is not None,
            conversation_store=conversation_store,
            exclusive=exclusive,
            orphan_grace_seconds=orphan_grace_seconds,
        )
        if durability is not None and workspace is None:
            raise ValueError("durability needs a conversation_id")
        if pool_size < 0:
            raise ValueError("pool_size must not be negative")
        self._security = ContainerSecurity(
            network_mode=network_mode,
            cap_add=tuple(cap_add),
            pids_limit=pids_limit,
            memory_bytes=parse_memory(memory),
            cpus=cpus,
            read_only_root=read_only_root,
            no_new_privileges=no_new_privileges,
            binds=tuple(binds),
        )
        self._image = image
        self._user_option = user
        address = engine.address if engine is not None else engine_address(docker_host)
        check_binds(
            self._security.binds,
            sockets=engine_sockets(address),
            local=address.startswith("unix://"),
        )
        self._labels = dict(labels or {})
        self._owns_engine = engine is None
        self._engine = engine or acquire_shared_engine(
            docker_host, api_version=api_version, request_timeout_seconds=request_timeout_seconds
        )
        self._runner = CommandRunner(self._engine)
        self._target: ContainerTarget | None = None
        self._last_container: str | None = None
        self._target_lock = threading.RLock()
        self._tree_pending: str | None = None
        """The container (a claimed pool member) whose workspace tree is still to be made;
        guarded by ``_target_lock`` (:meth:`_make_pending_tree`)."""
        self._store: ConversationStore | None = None
        self._owns_store = isinstance(conversation_store, str)
        self._storage_key: str | None = None
        self._binding: ConversationBinding | None = None
        self._service_key = engine_service_key(self._engine.address)
        if workspace is not None:
            self._store = resolve_conversation_store(conversation_store, _SHARED_STORE)
            self._binding = ConversationBinding(
                self._store,
                service_key=self._service_key,
                conversation_id=workspace.conversation_id,
                runtime_name=self.name,
                workspace_root=workspace.conversations_root,
                mismatch_error=DockerEngineError,
                durable=durability is not None,
            )
            self._storage_key = self._binding.storage_key
            self._guard = ConversationGuard(
                self._store,
                self._storage_key,
                description=f"conversation {workspace.conversation_id}",
                exclusive=exclusive,
                lease_ttl_seconds=lease_ttl_seconds,
                lease_wait_seconds=lease_wait_seconds,
                activity_interval_seconds=activity_interval_seconds,
            )
        volume = None
        if self._storage_key is not None:
            assert workspace is not None
            volume = (volume_name(self._storage_key), workspace.conversations_root)
        self._driver = DockerDriver(
            self._engine,
            image=image,
            security=self._security,
            labels=self._container_labels(),
            environment=self._base_environment,
            volume=volume,
            prepare=self._prepare_container,
            audit_fields=self._audit_fields,
            deployment_labels=self._labels,
        )
        self._pool: DockerPool | None = None
        if pool_size > 0 and workspace is not None and self._store is not None:
            self._pool = docker_pool(
                self._engine,
                self._store,
                conversation_store=conversation_store,
                size=pool_size,
                image=image,
                security=self._security,
                environment=self._base_environment,
                labels=self._labels,
                conversations_root=workspace.conversations_root,
                ttl_seconds=pool_ttl_seconds,
            )
        self._sandboxes = ConversationSandboxes(
            self._driver,
            binding=self._binding,
            tags=self._container_labels(),
            orphan_grace_seconds=orphan_grace_seconds,
            error=DockerEngineError,
            audit_fields=self._audit_fields,
            pool=self._pool,
        )
        self._durable = (
            DurableWorkspace(
                durability, conversation_id=workspace.conversation_id, binding=self._binding
            )
            if durability is not None and workspace is not None
            else None
        )
        self._closing = False
        self._pending_copies: dict[str, tuple[Skill, list[tuple[Path, str, bool]]]] = {}
        self._files = DockerFileSystem(
            self._engine,
            self._handle,
            boundary=workspace.directory if workspace else None,
            stage_root=workspace.conversations_root if workspace else None,
        )

    # ------------------------------------------------------------------- SPI

    @property
    def name(self) -> str:
        return RUNTIME_NAME

    @property
    def default_working_directory(self) -> str:
        return self._workspace.directory if self._workspace else self._remote_root

    @property
    def sandbox_id(self) -> str | None:
        """Id of the container this runtime is attached to (``None`` before first use)."""
        with self._target_lock:
            return self._target.container_id if self._target is not None else None

    @property
    def container_id(self) -> str | None:
        """The same as :attr:`sandbox_id`."""
        return self.sandbox_id

    @property
    def engine(self) -> DockerEngine:
        """The engine client: the one given, else the process's client for this engine and
        these settings, shared by every runtime built without one (its ``requests`` counts the
        calls of all of them; :func:`.engine.acquire_shared_engine`)."""
        return self._engine

    @property
    def conversation_record(self) -> ConversationRecord | None:
        """The conversation record as last read or written by this runtime."""
        return self._sandboxes.record

    @property
    def sandboxes(self) -> ConversationSandboxes[str]:
        """The sandbox lifecycle: core's rules over :class:`.driver.DockerDriver`."""
        return self._sandboxes

    @property
    def durable_workspace(self) -> DurableWorkspace | None:
        """The automatic snapshots and restores of this runtime (``None`` without
        ``durability``); its ``snapshot(runtime)`` takes one now (docs/durability.md)."""
        return self._durable

    def close(self) -> None:
        """Snapshot a used conversation when ``durability`` asks for it (only on the container
        this runtime is attached to: never one created for it), then close."""
        if self._durable is not None and not self._closed:
            with self._target_lock:
                attached = self._target is not None
            if attached:
                self._closing = True
                try:
                    self._durable.closing(self)
                finally:
                    self._closing = False
        super().close()

    @property
    def volume(self) -> str | None:
        """Name of the conversation's volume (``None`` without a conversation): a warm-pool
        member's when the conversation started from the pool (known once attached)."""
        return self._driver.volume[0] if self._driver.volume is not None else None

    @property
    def pool(self) -> DockerPool | None:
        """The warm pool new conversations are served from (``None`` unless ``pool_size``)."""
        return self._pool

    def destroy_conversation(self) -> None:
        """End the conversation: delete its record, then remove its container and volume.

        Call it when the conversation is over, not after each turn. An exclusive runtime does
        it under the conversation's lease.
        """
        if self._store is None or self._storage_key is None:
            raise DockerEngineError("destroy_conversation() needs a conversation_id")
        with self.exclusive_session():
            with self._target_lock:
                local = self._target
            with audited("sandbox.destroy", **self._audit_fields()):
                self._sandboxes.destroy(local.container_id if local is not None else None)
                with self._target_lock:
                    self._target = None
                with self._lock:
                    self._prepared.clear()
                self._driver.remove_volume()
                if self._durable is not None:
                    self._durable.forget()

    # ----------------------------------------------------------------- hooks

    def _run(
        self, request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        target = self._handle(tree_deferred=True)
        try:
            result = self._run_in(target, request, working_directory, environment)
        except CommandNotStartedError as exc:
            if exc.status_code not in {404, 409} or not self._vanished(target):
                raise
            # The exec could not even be created: the command never ran, so it goes to the
            # replacement container.
            logger.warning("container %s vanished before a command started", target.container_id)
            return self._run_in(
                self._handle(tree_deferred=True), request, working_directory, environment
            )
        except (DockerEngineError, DockerExecutionError) as exc:
            if self._vanished(target):
                raise _replaced(target) from exc
            raise
        if result.exit_code in {-1, 137} and self._vanished(target, settle_seconds=1.0):
            # Killed with its container (a stream the engine left open ends at the deadline).
            raise _replaced(target)
        return result

    def _run_in(
        self,
        target: ContainerTarget,
        request: SkillExecutionRequest,
        working_directory: str,
        environment: dict[str, str],
    ) -> SkillExecutionResult:
        """One exec of the command; on a claimed member whose workspace is still to be made, a
        gated one (:meth:`.commands.CommandRunner.run`): the tree is made while the exec starts
        and the command runs only once it is (:meth:`_gate_tree`)."""
        with self._target_lock:
            pending = self._tree_pending == target.container_id
        return self._runner.run(
            target.container_id,
            request.command,
            working_directory=working_directory,
            environment=environment,
            user=target.user,
            timeout_seconds=request.timeout_seconds,
            max_output_bytes=request.max_output_bytes,
            gate=(lambda: self._gate_tree(target)) if pending else None,
        )

    def _gate_tree(self, target: ContainerTarget) -> None:
        """The gate of a command's exec on a claimed member: its workspace tree made now
        (once, whichever thread comes first). A failure is raised as
        :class:`CommandNotStartedError` (the command was not run; the tree is still to be
        made, by the next call)."""
        try:
            self._make_pending_tree(target)
        except DockerEngineError as exc:
            assert self._workspace is not None
            raise CommandNotStartedError(
                f"the workspace {self._workspace.directory} could not be made in the "
                f"conversation's new container, so the command was not run: {exc}",
                status_code=exc.status_code,
            ) from exc

    def _make_pending_tree(self, target: ContainerTarget) -> None:
        """Make ``target``'s workspace tree if it is still to be made (a claimed pool member,
        :meth:`_acquire`), exactly as :meth:`_make_tree` makes a new container's; under
        ``_target_lock``, so two threads never both make it. It stays to be made when this
        fails."""
        with self._target_lock:
            if self._tree_pending != target.container_id:
                return
            self._make_tree(target)
            self._tree_pending = None

    def _raw_file_system(self) -> SkillRuntimeFileSystem:
        return self._files

    def _skills_root(self) -> str | None:
        return self._workspace.skills_directory if self._workspace else self._remote_root

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        """The copy is sent by the next step, so that a skill without bootstrap commands is
        placed and marked ready by one operation (:meth:`DockerFileSystem.place_tree`: in a
        conversation two ``PUT`` s into a root-only staging directory and one exec that moves
        the tree into place by a pinned walk; without one, ``tar -x`` run as the user). Same
        digest means same bytes, so an earlier incomplete copy is simply replaced (removed,
        never followed)."""
        items = [(item.local_path, item.relative_path, item.executable) for item in files]
        with self._lock:
            self._pending_copies[target] = (skill, items)

    def _send_copy(self, target: str, marker: tuple[str, bytes] | None) -> bool:
        """Send the copy :meth:`_place_skill` left for ``target`` (with the ready ``marker``);
        ``False`` when none is pending."""
        with self._lock:
            pending = self._pending_copies.pop(target, None)
        if pending is None:
            return False
        skill, items = pending
        try:
            self._files.place_tree(target, items, marker=marker)
        except Exception as exc:
            failure = place_failure(skill, self.name, exc)
            if failure is exc:
                raise
            raise failure from exc
        return True

    def _bootstrap(self, prepared: Skill, config: SkillRuntimeConfig) -> None:
        if config.bootstrap:
            self._send_copy(prepared.base_path, None)
        super()._bootstrap(prepared, config)

    def _is_ready(self, target: str) -> bool:
        """One ``GET`` of the ready marker. Its parents are resolved by the engine inside the
        container; that is enough here: the answer is only whether the marker names this
        container, which the container's user could write in place anyway; a marker that is a
        link, or anything but a small regular file, is not ready."""
        container = self._handle()
        try:
            text = self._read_small(container.container_id, ready_marker_path(target))
        except DockerEngineError:
            return False
        return text is not None and text.strip() == _MARKER_PREFIX + container.container_id

    def _mark_ready(self, target: str, *, digest: str) -> None:
        """The marker sent with the copy when it is still pending (no bootstrap command),
        else written as the runtime's user (one exec, :meth:`DockerFileSystem.write_stream`)."""
        container = self._handle()
        marker = ready_marker_path(target)
        data = f"{_MARKER_PREFIX}{container.container_id}\n".encode()
        if not self._send_copy(target, (marker, data)):
            self._files.write_stream(marker, [data])

    def _close_resources(self) -> None:
        with self._target_lock:
            target, self._target = self._target, None
        try:
            if target is not None and self._store is None:
                try:
                    with audited("sandbox.destroy", **self._audit_fields()):
                        self._driver.kill(target.container_id)
                except SkillRuntimeError:
                    logger.warning(
                        "removing container %s at close failed", target.container_id, exc_info=True
                    )
        finally:
            try:
                if self._owns_engine:
                    release_shared_engine(self._engine)
            finally:
                if self._owns_store and self._store is not None:
                    self._store.close()

    # ------------------------------------------------------------ container

    def _container_labels(self) -> dict[str, str]:
        """The labels of this runtime's containers and volumes (see the module docs)."""
        labels = {**self._labels, LABEL_RUNTIME: RUNTIME_NAME}
        if self._storage_key is not None:
            assert self._workspace is not None
            labels[LABEL_CONVERSATION_KEY] = self._storage_key
            labels[LABEL_CONVERSATION_ID] = self._workspace.conversation_id
            labels[LABEL_VOLUME] = volume_name(self._storage_key)
            labels[LABEL_ROLE] = ROLE_CONVERSATION
        else:
            labels[LABEL_ROLE] = ROLE_PRIVATE
        return labels

    def _handle(self, *, tree_deferred: bool = False) -> ContainerTarget:
        """The live container, created or attached on first use. A claimed member's workspace
        tree is made here before anything uses the container, unless ``tree_deferred`` (a
        command: its exec makes it, :meth:`_run_in`)."""
        with self._target_lock:
            self._ensure_open()
            if self._target is None and self._closing:
                raise DockerEngineError(
                    "the conversation's container went away; no new one is made while closing"
                )
            if self._target is None:
                self._tree_pending = None
                with audited("sandbox.attach", **self._audit_fields()) as record:
                    target = self._acquire()
                    record.sandbox_id = target.container_id
                if self._last_container is not None and self._last_container != target.container_id:
                    with self._lock:  # a new container has bootstrapped none of the copies
                        self._prepared.clear()
                self._last_container = target.container_id
                self._target = target
                if self._durable is not None:
                    self._durable.attached(target.container_id)
            current = self._target
            if not tree_deferred:
                self._make_pending_tree(current)
        if self._durable is not None:
            self._durable.before(self)
        return current

    def _vanished(self, target: ContainerTarget, *, settle_seconds: float = 0.0) -> bool:
        """Whether ``target``'s container has ended; if so the handle is dropped.

        ``settle_seconds``: after a command came back killed, keep asking that long (a container
        being removed still reports itself running for a moment after its processes died)."""
        deadline = time.monotonic() + settle_seconds
        while True:
            try:
                info = self._engine.inspect(target.container_id)
            except DockerEngineError:
                return False
            if info is None or not info.get("State", {}).get("Running"):
                break
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        logger.warning("container %s has vanished or stopped", target.container_id)
        with self._target_lock:
            if self._target is target:
                self._target = None
        return True

    def _prepare_container(self, container_id: str) -> None:
        """Archive work on a new container while it starts: resolve its user, create the
        workspace (or ``remote_root``) owned by that user."""
        self._make_tree(self._target_for(container_id))

    def _acquire(self) -> ContainerTarget:
        """The container to use: created, or the conversation's attached (core's
        :class:`~skillruntime.core.conversations.sandboxes.ConversationSandboxes`).

        On the cold path of a new conversation, two steps are left out: the orphan scan when
        the volume was created less than ``orphan_grace_seconds`` ago (every container of the
        conversation mounts its volume, so none can be older than the grace; see
        :meth:`.driver.DockerDriver.ensure_volume`), and the workspace tree when this call
        created the container (:meth:`_prepare_container` made it). On a claimed pool member
        the tree is left to be made by the first use (:meth:`_handle`): a command makes it
        while its exec starts (:meth:`_run_in`), anything else first."""
        acquired = self._sandboxes.acquire()
        container_id = acquired.sandbox_id
        if self._workspace is None and self._security.read_only_root:
            # The archive API cannot write below a read-only root: the user makes remote_root
            # once the container runs.
            try:
                self._files.make_directory(self._remote_root, target=self._target_for(container_id))
            except BaseException:
                self._engine.remove_container(container_id)
                raise
        target = self._target_for(container_id)
        if self._workspace is not None and acquired.pooled:
            # A member is personalised as a new container would be, by its first use.
            self._tree_pending = container_id
        elif self._workspace is not None and not acquired.created:
            self._make_tree(target, attached=True)
        return target

    # -------------------------------------------------------------- users

    def _target_for(self, container_id: str) -> ContainerTarget:
        key = (self._engine.address, self._image, self._user_option)
        with _USERS_LOCK:
            known = _USERS.get(key)
        if known is None:
            known = self._resolve_user(container_id)
            with _USERS_LOCK:
                _USERS[key] = known
        return ContainerTarget(container_id, *known)

    def _resolve_user(self, container_id: str) -> tuple[int, int]:
        option = self._user_option
        if option is None:
            info = self._engine.inspect(container_id) or {}
            image_user = str(info.get("Config", {}).get("User") or "")
            if image_user and image_user.split(":", maxsplit=1)[0] not in {"root", "0"}:
                option = image_user
        if option is not None:
            name, _, group = option.partition(":")
            if name == "root":
                name = "0"
            if name.isdigit():
                uid = int(name)
                if group.isdigit():
                    return uid, int(group)
                found = self._passwd_entry(container_id, None, uid=uid)
                return uid, found[1] if found else uid
            entry = self._passwd_entry(container_id, name)
            if entry is None:
                raise DockerEngineError(f"user {name} does not exist in image {self._image}")
            return entry[0], int(group) if group.isdigit() else entry[1]
        found = self._passwd_entry(container_id, None)
        return found if found is not None else _FALLBACK_USER

    def _passwd_entry(
        self, container_id: str, name: str | None, *, uid: int | None = None
    ) -> tuple[int, int] | None:
        text = self._read_small(container_id, "/etc/passwd")
        if text is None:
            return None
        if uid is not None:
            for line in text.splitlines():
                fields = line.split(":")
                if len(fields) >= 4 and fields[2] == str(uid) and fields[3].isdigit():
                    return uid, int(fields[3])
            return None
        return _passwd_user(text, name)

    def _read_small(self, container_id: str, path: str) -> str | None:
        """A small regular file of the container read through the archive API (no exec)."""
        try:
            chunks = self._engine.get_archive(container_id, path, 65536)
        except DockerEngineError as exc:
            if exc.status_code == 404:
                return None
            raise
        reader = MemberReader(chunks)
        try:
            member = reader.first()
            if member is None or not member.isreg() or member.size > 1024 * 1024:
                return None
            return b"".join(reader.content(member, 65536)).decode("utf-8", "replace")
        except ArchiveMemberError:
            return None
        finally:
            reader.close()

    def _make_tree(self, target: ContainerTarget, *, attached: bool = False) -> None:
        """Create the workspace (or ``remote_root``) and its missing parents owned by the
        runtime's user (the archive API writes as the engine, whatever the container's
        capabilities).

        A workspace is one ``PUT`` to the volume's mount point (the workspace directory is a
        member: made when missing, owned by the user with mode ``0755`` afterwards; a directory
        between them is root's, so no command can change the way while the engine extracts);
        on a container ``attached`` (not created by this call) one stat comes first and a
        workspace directory already there is left as it is. ``remote_root`` is made below
        its deepest existing parent, found with stats once per engine, image and directory in
        the process (one ``PUT`` afterwards); with a read-only root it is made by the user once
        the container runs (one exec)."""
        if self._workspace is not None:
            directory = self._workspace.directory
            if attached:
                found = self._engine.stat_path(target.container_id, directory)
                if found is not None and found.is_directory:
                    return
            try:
                self._put_tree(target, self._workspace.conversations_root, directory)
                return
            except DockerEngineError as exc:
                if exc.status_code != 404:
                    raise
            raise DockerEngineError(
                f"cannot create the workspace {directory}: the container or its volume's mount "
                f"point {self._workspace.conversations_root} was not found",
                status_code=404,
            )
        directory = self._remote_root
        if self._security.read_only_root:
            # The archive API cannot write below a read-only root, nor see a tmpfs mounted on
            # it: the user makes the directory once the container runs (see _create).
            return
        key = (self._engine.address, self._image, directory)
        with _USERS_LOCK:
            base = _TREE_BASES.get(key)
        if base is not None:
            if base == directory:
                return
            try:
                self._put_tree(target, base, directory)
                return
            except DockerEngineError as exc:
                if exc.status_code != 404:
                    raise
        base = self._existing_parent(target, directory)
        with _USERS_LOCK:
            _TREE_BASES[key] = base
        if base != directory:
            self._put_tree(target, base, directory)

    def _existing_parent(self, target: ContainerTarget, directory: str) -> str:
        """``directory`` or its deepest existing parent in the container (stats)."""
        probe = directory
        while probe != "/":
            found = self._engine.stat_path(target.container_id, probe)
            if found is not None:
                if not found.is_directory:
                    raise DockerEngineError(f"{probe} exists in the container and is no directory")
                return probe
            probe = posixpath.dirname(probe)
        return probe

    def _put_tree(self, target: ContainerTarget, base: str, directory: str) -> None:
        """``directory`` made below ``base`` with one ``PUT``: the directories between them are
        root's (``0755``), only ``directory`` itself is the user's, so nothing the user owns is
        on the way while the engine extracts."""
        parts = posixpath.relpath(directory, base).split("/")
        entries = [
            DirectoryEntry(
                "/".join(parts[: index + 1]),
                owner=None if index == len(parts) - 1 else (0, 0),
            )
            for index in range(len(parts))
        ]
        self._engine.put_archive(
            target.container_id, base, tar_stream(entries, uid=target.uid, gid=target.gid)
        )
