"""The conversation store SPI: where a conversation's sandbox and prepared skills are recorded.

A remote runtime in conversation mode keeps one :class:`ConversationRecord` per conversation so
that any process on any node finds the same sandbox and knows which skills are already prepared
in it. Stores never overwrite blindly: :meth:`ConversationStore.create` is an atomic
insert-if-absent and :meth:`ConversationStore.update` a compare-and-set on ``version``. Callers
that change a record use :func:`modify_record`, which re-reads and retries on conflict.

Built in: ``InMemoryConversationStore`` (one process) in :mod:`.memory` and
``SqlConversationStore`` in :mod:`.sql` (extra ``skillruntime-core[sql]``).
:func:`open_conversation_store` builds a store from a URL through the
``skillruntime_conversation_stores`` plugin hook.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import ConversationStoreError, StoreConflictError
from ..runtime.closing import Closeable
from ..runtime.workspace import validate_conversation_id

__all__ = [
    "MAX_LEASE_OWNER",
    "ConversationLease",
    "ConversationRecord",
    "ConversationStore",
    "ConversationStoreError",
    "modify_record",
    "open_conversation_store",
    "service_key_for_url",
    "storage_key_for",
]

logger = logging.getLogger(__name__)


MAX_LEASE_OWNER = 256
"""The longest lease owner id, in characters."""


class ConversationLease(BaseModel):
    """A lease as stored: ``owner`` holds ``lease_key`` until ``expires_at`` (UTC).

    ``token`` grows by one each time a different owner takes the lease (a fencing counter); a
    released lease has ``owner`` ``None``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    lease_key: str = Field(min_length=1, max_length=64)
    owner: str | None = Field(default=None, max_length=MAX_LEASE_OWNER)
    token: int = Field(ge=1)
    expires_at: datetime

    @field_validator("expires_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def held_by(self, owner: str, now: datetime | None = None) -> bool:
        """Whether ``owner`` holds the lease and it has not expired at ``now``."""
        return self.owner == owner and not self.expired(now)

    def expired(self, now: datetime | None = None) -> bool:
        """Whether nobody holds the lease at ``now`` (released or past its expiry)."""
        moment = now or datetime.now(UTC)
        return self.owner is None or self.expires_at <= moment


def service_key_for_url(url: str) -> str:
    """A stable identity of a service derived from its URL, never from credentials.

    Scheme and host are lower-cased, default ports dropped, user info, query and fragment
    removed and a trailing ``/`` stripped, so ``HTTP://Sandbox.example:80/`` and
    ``http://sandbox.example`` name the same service and rotating an API key keeps it.
    """
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError("a service URL must name a host")
    port = parts.port
    shown_host = f"[{host}]" if ":" in host else host  # IPv6 literals keep their brackets
    if port is None or port == {"http": 80, "https": 443}.get(scheme):
        netloc = shown_host
    else:
        netloc = f"{shown_host}:{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{netloc}{path}"


def storage_key_for(service_key: str, conversation_id: str) -> str:
    """The record key: hex sha256 of the service key and the conversation id."""
    validate_conversation_id(conversation_id)
    payload = f"{service_key}\n{conversation_id}".encode()
    return hashlib.sha256(payload).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


class ConversationRecord(BaseModel):
    """What a store knows about one conversation (immutable; derive changes with ``model_copy``).

    ``prepared_skills`` maps a skill's content digest to the remote base path of its prepared
    copy. ``version`` is maintained by the store: ``create`` stores version 1, a successful
    ``update`` stores ``record.version + 1``.

    The durability fields (docs/durability.md, "Automatic snapshots and restores"):
    ``snapshot_id`` is the last good workspace snapshot of the conversation (the id of its
    manifest in the snapshot store), ``restore_pending`` says that the sandbox the record names
    was created or replaced and nobody has yet checked whether its workspace must be restored.
    Both stay at their defaults for a runtime without durability.

    ``sandbox_storage`` says where the sandbox's persistent storage lives when it is not the
    conversation's default (Docker: the name of the volume of a warm-pool member the
    conversation claimed; docs/docker-runtime.md, "Warm pools"): a replacement sandbox mounts
    it and destroying the conversation removes it. ``None``: the runtime's default storage.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    storage_key: str = Field(min_length=64, max_length=64, pattern=r"^[0-9a-f]{64}$")
    service_key: str = Field(min_length=1, max_length=512)
    conversation_id: str
    runtime: str = Field(min_length=1, max_length=64)
    workspace_root: str = Field(min_length=1, max_length=1024)
    sandbox_id: str | None = Field(default=None, max_length=256)
    workspace_ready: bool = False
    prepared_skills: Mapping[str, str] = Field(default_factory=dict)
    snapshot_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    restore_pending: bool = False
    sandbox_storage: str | None = Field(default=None, min_length=1, max_length=256)
    version: int = Field(default=1, ge=1)
    updated_at: datetime = Field(default_factory=_now)

    @field_validator("conversation_id")
    @classmethod
    def _valid_conversation(cls, value: str) -> str:
        validate_conversation_id(value)
        return value

    @field_validator("updated_at")
    @classmethod
    def _aware_updated_at(cls, value: datetime) -> datetime:
        # A naive time counts as UTC, so every store compares and persists the same instant.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value

    @field_validator("prepared_skills")
    @classmethod
    def _copied_skills(cls, value: Mapping[str, str]) -> dict[str, str]:
        return dict(value)

    @classmethod
    def new(
        cls,
        *,
        service_key: str,
        conversation_id: str,
        runtime: str,
        workspace_root: str,
        sandbox_id: str | None = None,
        restore_pending: bool = False,
        sandbox_storage: str | None = None,
    ) -> ConversationRecord:
        """A first record for ``conversation_id`` with its storage key computed."""
        return cls(
            storage_key=storage_key_for(service_key, conversation_id),
            service_key=service_key,
            conversation_id=conversation_id,
            runtime=runtime,
            workspace_root=workspace_root,
            sandbox_id=sandbox_id,
            restore_pending=restore_pending,
            sandbox_storage=sandbox_storage,
        )

    def with_changes(self, **changes: Any) -> ConversationRecord:
        """A validated copy with ``changes`` applied and ``updated_at`` refreshed."""
        data = {**self.model_dump(), "updated_at": _now(), **changes}
        return ConversationRecord.model_validate(data)

    def with_prepared_skill(self, digest: str, base_path: str) -> ConversationRecord:
        """A copy that also records ``digest`` as prepared at ``base_path``."""
        skills = dict(self.prepared_skills)
        skills[digest] = base_path
        return self.with_changes(prepared_skills=skills)


class ConversationStore(Closeable, ABC):
    """Persistent records of conversations, shared by every node that serves them.

    Implementations are safe to call from several threads. None of them may overwrite a
    record without checking its version (no last-writer-wins anywhere).
    """

    @abstractmethod
    def get(self, storage_key: str) -> ConversationRecord | None:
        """The record stored under ``storage_key``, or ``None``."""

    @abstractmethod
    def create(self, record: ConversationRecord) -> bool:
        """Insert ``record`` (stored as version 1) unless its key exists; ``True`` if inserted."""

    @abstractmethod
    def update(self, record: ConversationRecord) -> bool:
        """Compare-and-set: replace the stored record if its version equals ``record.version``.

        The stored copy gets ``version + 1``. ``False`` when the record changed meanwhile or is
        gone; callers re-read and retry (see :func:`modify_record`).
        """

    @abstractmethod
    def delete(self, storage_key: str) -> ConversationRecord | None:
        """Remove the record and return what was stored (``None`` if there was none)."""

    def close(self) -> None:
        """Release connections (idempotent); the default holds nothing."""

    # -- listing, conditional delete and leases (see skillruntime.core.conversations.leases) --
    # Not abstract so that stores written before these existed keep working; such a store
    # raises ConversationStoreError when a sweep or an exclusive runtime needs them.

    def list_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ConversationRecord]:
        """Up to ``limit`` records with a storage key greater than ``after``, by storage key."""
        raise self._unsupported("listing records")

    def delete_version(self, storage_key: str, version: int) -> bool:
        """Compare-and-set delete: remove the record only if it is still at ``version``."""
        raise self._unsupported("conditional deletes")

    def get_lease(self, lease_key: str) -> ConversationLease | None:
        """The lease stored under ``lease_key`` (live, expired or released), or ``None``."""
        raise self._unsupported("leases")

    def acquire_lease(
        self, lease_key: str, owner: str, ttl_seconds: float
    ) -> ConversationLease | None:
        """Take the lease for ``owner`` for ``ttl_seconds``; ``None`` while another owner holds
        it. Free, expired and released leases are taken over (``token`` + 1); ``owner``'s own
        live lease is extended and keeps its token."""
        raise self._unsupported("leases")

    def renew_lease(self, lease: ConversationLease, ttl_seconds: float) -> ConversationLease | None:
        """Extend ``lease`` by ``ttl_seconds`` from now if its owner and token are still the
        stored ones; ``None`` when it was taken over or released."""
        raise self._unsupported("leases")

    def release_lease(self, lease: ConversationLease) -> bool:
        """Release ``lease`` if its owner and token are still the stored ones."""
        raise self._unsupported("leases")

    def _unsupported(self, what: str) -> ConversationStoreError:
        return ConversationStoreError(f"the conversation store {type(self).__name__} has no {what}")


def modify_record(
    store: ConversationStore,
    storage_key: str,
    change: Callable[[ConversationRecord], ConversationRecord | None],
    *,
    attempts: int = 32,
    max_backoff_seconds: float = 0.05,
) -> ConversationRecord | None:
    """Apply ``change`` to the stored record with compare-and-set, re-reading on conflict.

    ``change`` gets the current record and returns the wanted one (or ``None`` to leave it).
    Returns the record as stored afterwards, or ``None`` if there is no record. After a lost
    race it waits a random time (full jitter, doubling from 1 ms up to ``max_backoff_seconds``)
    so that many nodes writing one conversation spread out instead of colliding again. Raises
    :class:`~skillruntime.core.errors.StoreConflictError` after ``attempts`` lost races.

    A write that landed is never reported as a failure: when the re-read after a won
    compare-and-set fails, the record is returned as written (its ``updated_at`` may differ from
    the stored one by the time the write took); when ``update`` itself raises (e.g. the
    connection dropped during the commit), the record is read once more and returned if it holds
    exactly this write. Otherwise the store's error is raised; a write is never retried after an
    error, only after a lost race.
    """
    for attempt in range(attempts):
        if attempt:
            jitter = random.uniform(0.0, min(max_backoff_seconds, 0.001 * 2**attempt))  # noqa: S311
            time.sleep(jitter)
        current = store.get(storage_key)
        if current is None:
            return None
        wanted = change(current)
        if wanted is None:
            return current
        if wanted.storage_key != storage_key:
            raise ValueError("modify_record: the change must keep the record's storage_key")
        try:
            won = store.update(wanted.with_changes(version=current.version))
        except ConversationStoreError:
            landed = _landed_write(store, wanted, current.version + 1)
            if landed is None:
                raise
            logger.warning(
                "updating conversation record %s… raised but the write landed", storage_key[:12]
            )
            return landed
        if won:
            written = wanted.with_changes(version=current.version + 1)
            try:
                return store.get(storage_key) or written
            except ConversationStoreError:
                logger.warning(
                    "re-reading conversation record %s… after a successful update failed; "
                    "returning the record as written",
                    storage_key[:12],
                    exc_info=True,
                )
                return written
    raise StoreConflictError(
        f"conversation record {storage_key[:12]}… changed {attempts} times while updating it; "
        "too many nodes are writing the same conversation"
    )


def _landed_write(
    store: ConversationStore, wanted: ConversationRecord, version: int
) -> ConversationRecord | None:
    """The stored record if it is ``wanted`` written as ``version``, else ``None`` (also when it
    cannot be read)."""
    try:
        stored = store.get(wanted.storage_key)
    except ConversationStoreError:
        return None
    if stored is None or stored.version != version:
        return None
    ignored = {"version", "updated_at"}
    if stored.model_dump(exclude=ignored) != wanted.model_dump(exclude=ignored):
        return None
    return stored


def open_conversation_store(url: str, **options: Any) -> ConversationStore:
    """Build a store from a URL (``memory://``, ``sqlite:///…``, ``postgresql+psycopg://…``…).

    The scheme before any ``+driver`` selects a provider registered through the
    ``skillruntime_conversation_stores`` hook; the whole URL goes to its factory.
    """
    from ..plugins.registry import available_conversation_stores

    scheme = url.partition("://")[0].lower() if "://" in url else ""
    base = scheme.partition("+")[0]
    providers = available_conversation_stores()
    provider = providers.get(scheme) or providers.get(base)
    if provider is None:
        known = ", ".join(sorted(providers)) or "none"
        raise ValueError(
            f"no conversation store serves the URL scheme {scheme or '(none)'!r}; "
            f"installed schemes: {known}"
        )
    store = provider.factory(url, **options)
    if not isinstance(store, ConversationStore):
        raise ConversationStoreError(
            f"the conversation store provider for {scheme!r} returned {type(store).__name__}, "
            "not a ConversationStore"
        )
    return store
