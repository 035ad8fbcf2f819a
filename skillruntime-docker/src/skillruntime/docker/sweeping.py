"""``DockerReaper``: what expiry sweeps do with Docker conversations.

:meth:`DockerReaper.destroy` removes the container an idle conversation's record named and the
conversation's volume (the sweep deleted the record first). :meth:`DockerReaper.orphans` lists
the containers and volumes the runtime labelled with a conversation
(``skillruntime-runtime=docker`` and ``skillruntime-conversation-key``) that no record names,
once they are older than ``orphan_grace_seconds``; the warm-pool members and member volumes
(``skillruntime-role=pool``) no record names, once older than ``pool_ttl_seconds``
(docs/docker-runtime.md, "Warm pools"); and the private containers (a runtime
without a conversation) whose keep-alive process has ended — not running: exited, dead or never
started — once as old (a running private container belongs to a live runtime, which removes it
at close). Only conversations of this reaper's engine are considered (records carry the
engine's service key).

An engine shared by deployments with *different* stores must tell their containers apart, or one
deployment's sweep would take the other's for orphans: give each deployment's runtimes a
``labels`` tag (e.g. ``{"app": "billing"}``) and its reaper the same ``labels``. Every label is
checked on the client before anything is removed (whatever the engine's filter returned), and a
container or volume any record names is never an orphan.

:meth:`DockerReaper.snapshot_workspace` lets ``skillruntime conversations sweep
--snapshot-store`` snapshot an idle conversation's workspace before the sweep destroys it
(docs/durability.md, "Before a sweep"): a :class:`~skillruntime.docker.DockerSkillRuntime` built
from the same ``SKILLRUNTIME_DOCKER_*`` options as the CLI's runtimes attaches to the recorded
container, and the workspace is snapshotted as
:func:`~skillruntime.core.durability.automatic.snapshot_before_sweep` does. No container is ever
created for it: when the record's container is gone and so is the conversation's volume, there
is nothing to snapshot (the sweep goes on); when the container is gone but the volume still
holds the workspace, the snapshot fails and the sweep keeps the conversation (open it once, so
a runtime replaces its container, or sweep it without ``--snapshot-store`` to discard it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from skillruntime.core.conversations import ConversationRecord, storage_key_for
from skillruntime.core.conversations.sandboxes import TaggedSandbox, conversation_orphans
from skillruntime.core.conversations.sweeps import OrphanSandbox
from skillruntime.core.errors import SnapshotError

from .driver import ENDED_STATES
from .engine import DockerEngine, engine_service_key, parse_time
from .options import DockerRuntimeOptions
from .pool import DEFAULT_POOL_TTL_SECONDS, POOL_VOLUME_PREFIX, ROLE_POOL, member_labels
from .runtime import (
    DEFAULT_ORPHAN_GRACE_SECONDS,
    LABEL_CONVERSATION_ID,
    LABEL_CONVERSATION_KEY,
    LABEL_ROLE,
    LABEL_RUNTIME,
    LABEL_VOLUME,
    ROLE_PRIVATE,
    RUNTIME_NAME,
    labels_match,
    volume_name,
)

if TYPE_CHECKING:
    from skillruntime.core.snapshots.spi import SnapshotStore

    from .runtime import DockerSkillRuntime

__all__ = ["VOLUME_PREFIX", "DockerReaper", "reaper_from_environment"]

logger = logging.getLogger(__name__)

VOLUME_PREFIX = "volume:"
"""How :meth:`DockerReaper.orphans` names an orphan volume in ``OrphanSandbox.sandbox_id``."""


class DockerReaper:
    """Removes idle conversations' containers and volumes and finds orphans on one engine.

    ``docker_host`` falls back to ``DOCKER_HOST`` like the runtime's; ``labels`` are the
    deployment's own labels, required (exactly) of everything it removes.
    ``runtime_options`` are the options of the runtime :meth:`snapshot_workspace` opens (image,
    user, isolation…; default: the ``SKILLRUNTIME_DOCKER_*`` environment, read when first
    needed); the engine and labels are always this reaper's.
    """

    runtime = RUNTIME_NAME

    def __init__(
        self,
        *,
        docker_host: str | None = None,
        api_version: str = "auto",
        request_timeout_seconds: float = 60.0,
        labels: Mapping[str, str] | None = None,
        orphan_grace_seconds: float = DEFAULT_ORPHAN_GRACE_SECONDS,
        engine: DockerEngine | None = None,
        pool_ttl_seconds: float = DEFAULT_POOL_TTL_SECONDS,
        runtime_options: DockerRuntimeOptions | None = None,
    ) -> None:
        if orphan_grace_seconds < 0:
            raise ValueError("orphan_grace_seconds must not be negative")
        self._owns_engine = engine is None
        self._engine = engine or DockerEngine(
            docker_host, api_version=api_version, request_timeout_seconds=request_timeout_seconds
        )
        self._labels = dict(labels or {})
        self._grace = orphan_grace_seconds
        self._pool_ttl = pool_ttl_seconds
        self.service_key = engine_service_key(self._engine.address)
        self._runtime_options = runtime_options

    def _required(self, record: ConversationRecord) -> dict[str, str]:
        key = storage_key_for(record.service_key, record.conversation_id)
        return {
            **self._labels,
            LABEL_RUNTIME: RUNTIME_NAME,
            LABEL_CONVERSATION_KEY: key,
            LABEL_CONVERSATION_ID: record.conversation_id,
        }

    def _member(self, record: ConversationRecord) -> dict[str, str] | None:
        """The labels of the warm-pool member whose volume the record names, if any."""
        if not record.sandbox_storage:
            return None
        return member_labels(self._labels, record.sandbox_storage)

    def _live_container(self, record: ConversationRecord) -> bool:
        """Whether the record's container exists, has not ended and carries every label of
        this conversation and deployment (or of the pool member it started from), as
        :meth:`destroy` requires before removing it."""
        if not record.sandbox_id:
            return False
        info = self._engine.inspect(record.sandbox_id)
        if info is None:
            return False
        labels = info.get("Config", {}).get("Labels")
        member = self._member(record)
        if not (
            labels_match(labels, self._required(record))
            or (member is not None and labels_match(labels, member))
        ):
            logger.warning(
                "not snapshotting through container %s: it lacks the conversation's labels",
                record.sandbox_id[:12],
            )
            return False
        return info.get("State", {}).get("Status") not in ENDED_STATES

    def _workspace_volume(self, record: ConversationRecord) -> str | None:
        """The name of the volume holding the record's workspace when it still exists with
        this conversation's (or its pool member's) labels."""
        member = self._member(record)
        if record.sandbox_storage and member is not None:
            pooled = self._engine.inspect_volume(record.sandbox_storage)
            if pooled is not None and labels_match(pooled.get("Labels"), member):
                return record.sandbox_storage
        name = volume_name(storage_key_for(record.service_key, record.conversation_id))
        volume = self._engine.inspect_volume(name)
        if volume is not None and labels_match(volume.get("Labels"), self._required(record)):
            return name
        return None

    def snapshot_workspace(self, record: ConversationRecord, store: SnapshotStore) -> None:
        """Snapshot the record's workspace into ``store`` before the sweep destroys it (see the
        module docs), through a runtime attached to the recorded container on
        :func:`~skillruntime.core.conversations.sweeps.record_copy_store` (the record the sweep
        holds is never written).

        A container that is gone, has ended or lacks the conversation's labels is never
        replaced: with the conversation's volume gone too nothing is snapshotted (logged);
        with the volume still there :class:`~skillruntime.core.errors.SnapshotError` is raised
        and the sweep keeps the conversation. The runtime is closed before returning; it leaves
        the recorded container as it was (the sweep removes it)."""
        from skillruntime.core.durability.automatic import snapshot_swept_record

        if record.service_key != self.service_key:
            raise ValueError(f"conversation {record.conversation_id} lives on another engine")
        if not self._live_container(record):
            volume = self._workspace_volume(record)
            if volume is not None:
                raise SnapshotError(
                    f"the container of conversation {record.conversation_id} is gone but its "
                    f"volume {volume} still holds the workspace; the sweep creates no container "
                    "to snapshot it: open the conversation once (a runtime replaces the "
                    "container), or sweep without --snapshot-store to discard it"
                )
            logger.info(
                "conversation %s has no container or volume left: nothing to snapshot",
                record.conversation_id,
            )
            return
        snapshot_swept_record(record, store, self._open_runtime)

    def _open_runtime(self, overrides: dict[str, Any]) -> DockerSkillRuntime:
        """A runtime with the environment's runtime options on this reaper's engine and labels,
        updated with ``overrides`` (the swept record's conversation, quiet)."""
        from .runtime import DockerSkillRuntime

        options = self._runtime_options or DockerRuntimeOptions()
        arguments = options.runtime_arguments()
        arguments.update(
            docker_host=None,
            engine=self._engine,
            labels=dict(self._labels),
            **overrides,
        )
        return DockerSkillRuntime(**arguments)

    def destroy(self, record: ConversationRecord) -> None:
        """Remove the record's container and the conversation's volume, each only when it
        carries every label of this conversation and deployment (one already gone counts as
        removed)."""
        if record.service_key != self.service_key:
            raise ValueError(f"conversation {record.conversation_id} lives on another engine")
        required = self._required(record)
        member = (
            member_labels(self._labels, record.sandbox_storage) if record.sandbox_storage else None
        )
        if record.sandbox_id:
            info = self._engine.inspect(record.sandbox_id)
            if info is not None:
                labels = info.get("Config", {}).get("Labels")
                if labels_match(labels, required) or (
                    member is not None and labels_match(labels, member)
                ):
                    self._engine.remove_container(record.sandbox_id)
                else:
                    logger.warning(
                        "not removing container %s: it lacks the conversation's labels",
                        record.sandbox_id[:12],
                    )
        if record.sandbox_storage and member is not None:
            # A conversation that started from the warm pool: its files are on the member's
            # volume (no container mounts it any more once the record's one is removed).
            pooled = self._engine.inspect_volume(record.sandbox_storage)
            if pooled is not None and labels_match(pooled.get("Labels"), member):
                self._engine.remove_volume(record.sandbox_storage)
        name = volume_name(storage_key_for(record.service_key, record.conversation_id))
        volume = self._engine.inspect_volume(name)
        if volume is not None:
            if labels_match(volume.get("Labels"), required):
                self._engine.remove_volume(name)
            else:
                logger.warning("not removing volume %s: it lacks the conversation's labels", name)

    def orphans(self, records: Sequence[ConversationRecord]) -> list[OrphanSandbox]:
        """Labelled containers and volumes of this engine that no record in ``records`` names
        (a volume appears as ``volume:<name>``)."""
        ours = [
            record
            for record in records
            if record.runtime == self.runtime and record.service_key == self.service_key
        ]
        named_keys = {storage_key_for(r.service_key, r.conversation_id) for r in ours}
        required = {**self._labels, LABEL_RUNTIME: RUNTIME_NAME}
        now = time.time()
        listed = self._engine.list_containers(required)
        found = conversation_orphans(
            (
                TaggedSandbox(
                    sandbox_id=str(item.get("Id", "")),
                    tags=dict(item.get("Labels") or {}),
                    created_at=float(item.get("Created") or now),
                )
                for item in listed
            ),
            records,
            runtime=self.runtime,
            required=required,
            grace_seconds=self._grace,
            now=now,
        )
        for item in listed:
            labels = item.get("Labels") or {}
            container_id = str(item.get("Id", ""))
            if not container_id or not labels_match(labels, required):
                continue
            if labels.get(LABEL_CONVERSATION_KEY) is not None:
                continue  # a conversation's container: counted above
            # A private container: its runtime removes it at close; one whose keep-alive
            # process has ended (its runtime crashed, or the process was killed) is useless
            # to anyone and is an orphan once older than the grace.
            if labels.get(LABEL_ROLE) != ROLE_PRIVATE or item.get("State") == "running":
                continue
            created = float(item.get("Created") or now)
            if now - created < self._grace:
                continue
            found.append(
                OrphanSandbox(
                    runtime=self.runtime,
                    sandbox_id=container_id,
                    conversation_id=None,
                    created_at=datetime.fromtimestamp(created, UTC),
                )
            )
        found.extend(self._pool_orphans(listed, records, required, now))
        for volume in self._engine.list_volumes(required):
            labels = volume.get("Labels") or {}
            key = labels.get(LABEL_CONVERSATION_KEY)
            name = str(volume.get("Name", ""))
            if key is None or not labels_match(labels, required) or key in named_keys:
                continue
            if labels.get(LABEL_VOLUME) != name:
                continue
            created_at = parse_time(volume.get("CreatedAt"))
            if created_at is not None and (now - created_at.timestamp()) < self._grace:
                continue
            found.append(
                OrphanSandbox(
                    runtime=self.runtime,
                    sandbox_id=VOLUME_PREFIX + name,
                    conversation_id=labels.get(LABEL_CONVERSATION_ID),
                    created_at=created_at,
                )
            )
        return found

    def _pool_orphans(
        self,
        listed: Sequence[Mapping[str, Any]],
        records: Sequence[ConversationRecord],
        required: Mapping[str, str],
        now: float,
    ) -> list[OrphanSandbox]:
        """Warm-pool members and member volumes no record names, older than the pool TTL (an
        unclaimed member is never handed out that old; a claimed one a record does not name
        was left by a claimer that died before recording it)."""
        named = {record.sandbox_id for record in records if record.sandbox_id}
        storages = {record.sandbox_storage for record in records if record.sandbox_storage}
        pool_required = {**required, LABEL_ROLE: ROLE_POOL}
        found: list[OrphanSandbox] = []
        for item in listed:
            container_id = str(item.get("Id", ""))
            labels = item.get("Labels") or {}
            if not container_id or not labels_match(labels, pool_required):
                continue
            created = float(item.get("Created") or now)
            if container_id in named or labels.get(LABEL_VOLUME) in storages:
                continue
            if now - created < self._pool_ttl:
                continue
            found.append(
                OrphanSandbox(
                    runtime=self.runtime,
                    sandbox_id=container_id,
                    conversation_id=None,
                    created_at=datetime.fromtimestamp(created, UTC),
                )
            )
        for volume in self._engine.list_volumes(pool_required):
            name = str(volume.get("Name", ""))
            labels = volume.get("Labels") or {}
            if not labels_match(labels, pool_required) or labels.get(LABEL_VOLUME) != name:
                continue
            if name in storages or not name.startswith(POOL_VOLUME_PREFIX):
                continue
            created_at = parse_time(volume.get("CreatedAt"))
            if created_at is not None and now - created_at.timestamp() < self._pool_ttl:
                continue
            found.append(
                OrphanSandbox(
                    runtime=self.runtime,
                    sandbox_id=VOLUME_PREFIX + name,
                    conversation_id=None,
                    created_at=created_at,
                )
            )
        return found

    def destroy_orphan(self, orphan: OrphanSandbox) -> None:
        """Remove one orphan container or volume (its labels checked again first)."""
        required = {**self._labels, LABEL_RUNTIME: RUNTIME_NAME}
        if orphan.sandbox_id.startswith(VOLUME_PREFIX):
            name = orphan.sandbox_id[len(VOLUME_PREFIX) :]
            info = self._engine.inspect_volume(name)
            if info is not None and labels_match(info.get("Labels"), required):
                logger.warning("removing orphan volume %s", name)
                self._engine.remove_volume(name)
            return
        info = self._engine.inspect(orphan.sandbox_id)
        if info is not None and labels_match(info.get("Config", {}).get("Labels"), required):
            logger.warning("removing orphan container %s", orphan.sandbox_id[:12])
            self._engine.remove_container(orphan.sandbox_id)

    def close(self) -> None:
        """Release the engine's HTTP session (idempotent)."""
        if self._owns_engine:
            self._engine.close()


def reaper_from_environment() -> DockerReaper:
    """A reaper configured like the runtime from ``SKILLRUNTIME_DOCKER_*`` variables
    (``docker_host``, ``api_version``, ``request_timeout_seconds``, ``labels``; the runtime
    :meth:`DockerReaper.snapshot_workspace` opens takes every other option from them too)."""
    options = DockerRuntimeOptions()
    return DockerReaper(
        docker_host=options.docker_host,
        api_version=options.api_version,
        request_timeout_seconds=options.request_timeout_seconds,
        labels=dict(options.labels),
        runtime_options=options,
    )
