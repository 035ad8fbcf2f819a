"""One conversation-sandbox lifecycle for every container platform, over a small driver.

A remote runtime that gives each conversation its own sandbox (the ``docker`` and
``opensandbox`` runtimes, or a third party's) keeps the same rules whatever the platform; they
live here, once, in :class:`ConversationSandboxes`. A platform implements the seven calls of
:class:`SandboxDriver` (create, connect, kill, list by tags, tag, identify, release) and
gets every rule:

* **Attach or create.** Without a record, a *candidate* sandbox is created and the record
  inserted (a compare-and-set on the conversation store). The node that loses that race kills
  its candidate and joins the winner's. A candidate the record names after all (the store
  reported a write as failed that did land) is kept, never killed; one whose fate cannot be read
  is killed (an unrecorded sandbox would otherwise run until it expires).
* **Adopt the recorded sandbox.** A stored sandbox is connected (:meth:`SandboxDriver.connect`:
  reachable, running, carrying every tag). One that is gone is **replaced**: a new candidate is
  swapped into the record only if the record still names the gone one, so two nodes never
  replace it twice; the loser joins the winner's sandbox. A sandbox that exists but cannot be
  reached raises the driver's error and leaves the record alone.
* **Orphans.** On every attach, the conversation's sandboxes that no record names and that are
  older than ``orphan_grace_seconds`` are killed (left by a process that died between creating
  and recording its candidate). A sandbox counts only when it carries every tag of the
  conversation's candidates at exactly its value, checked here on the client whatever the
  platform's filter returned; it is never killed while any record of the store names it (this
  conversation's record is read again before each kill); when the store cannot list its records,
  nothing is killed.
* **Candidates and recorded sandboxes.** On a platform whose tags can change after creation
  (:attr:`SandboxDriver.retags`), a new sandbox carries ``skillruntime-role=candidate`` until
  the record names it, then ``conversation``, and only candidates are orphan candidates. On one
  whose tags are fixed at creation (Docker's labels), a conversation's sandbox is tagged
  ``conversation`` from the start and every unrecorded one past the grace is an orphan.
* **Destroy.** The record is deleted first, then the sandbox it named (and the local one) is
  killed, so no node attaches to a sandbox being killed.
* **Warm pools.** With a :class:`SandboxPool`, a conversation's *first* sandbox is claimed from
  the pool before one is created: the claim is atomic (a lease in the conversation store), the
  record is then inserted naming the member and its storage (``sandbox_storage``); a member
  whose record lost the race goes back to the pool. A pool miss falls through to the cold
  create. Replacements are always cold (on the storage the record names). A driver whose
  storage can live elsewhere than its default (Docker's volumes) implements the optional
  :class:`StorageDriver` hook ``use_storage``, called with the record's ``sandbox_storage``
  before the sandbox the record names is connected, replaced or killed. See
  ``docs/docker-runtime.md``, "Warm pools".

The rules on the record itself (compare-and-set, workspace root check) are
:class:`~skillruntime.core.conversations.binding.ConversationBinding`'s; leases stay with
:class:`~skillruntime.core.conversations.exclusive.ConversationGuard`. What a runtime does on a
sandbox once attached (workspace, skills, commands, files) stays in the runtime. The conformance
kit's :mod:`skillruntime.core.testing.driver_contracts` checks a driver against these rules;
``docs/custom-runtime.md`` shows a complete small driver.

Not thread-safe on its own: a runtime calls :meth:`ConversationSandboxes.acquire` under its
handle lock (one attach at a time per runtime object); several runtime objects and processes on
one conversation are what the record's compare-and-set is for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ..errors import SkillRuntimeError
from ..observability.audit import audited
from .binding import ConversationBinding
from .spi import ConversationRecord, ConversationStore
from .sweeps import OrphanSandbox

__all__ = [
    "DEFAULT_ORPHAN_GRACE_SECONDS",
    "ROLE_CANDIDATE",
    "ROLE_CONVERSATION",
    "ROLE_PRIVATE",
    "TAG_CONVERSATION_ID",
    "TAG_CONVERSATION_KEY",
    "TAG_ROLE",
    "TAG_RUNTIME",
    "AcquiredSandbox",
    "ConversationSandboxes",
    "PooledSandbox",
    "SandboxDriver",
    "SandboxPool",
    "StorageDriver",
    "TaggedSandbox",
    "conversation_orphans",
    "recorded_sandbox_ids",
    "tags_match",
]

logger = logging.getLogger(__name__)

H = TypeVar("H")

TAG_RUNTIME = "skillruntime-runtime"
"""The tag naming the runtime (``docker``, ``opensandbox``, …) that created a sandbox."""
TAG_CONVERSATION_KEY = "skillruntime-conversation-key"
"""The tag holding the conversation record's storage key."""
TAG_CONVERSATION_ID = "skillruntime-conversation-id"
"""The tag holding the conversation's id."""
TAG_ROLE = "skillruntime-role"
"""The tag telling a candidate, a recorded conversation sandbox and a private one apart."""
ROLE_CANDIDATE = "candidate"
ROLE_CONVERSATION = "conversation"
ROLE_PRIVATE = "private"

DEFAULT_ORPHAN_GRACE_SECONDS = 300.0
"""Age after which a conversation's sandbox that no record names counts as orphaned."""

ACQUIRE_ATTEMPTS = 8
"""Record reads an attach makes before it gives up on a record that keeps changing."""
_LIST_PAGE = 500


def tags_match(found: Mapping[str, str] | None, required: Mapping[str, str]) -> bool:
    """Whether ``found`` carries every tag of ``required`` at exactly its value."""
    found = found or {}
    return all(found.get(key) == value for key, value in required.items())


def recorded_sandbox_ids(store: ConversationStore) -> set[str] | None:
    """The sandbox ids every record of ``store`` names, or ``None`` when it cannot list them."""
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


@dataclass(frozen=True)
class TaggedSandbox:
    """A sandbox as a platform lists it: id, tags and creation time (epoch seconds; ``None``
    when the platform does not say, which counts as old enough to be an orphan)."""

    sandbox_id: str
    tags: Mapping[str, str]
    created_at: float | None = None


def conversation_orphans(
    listed: Iterable[TaggedSandbox],
    records: Sequence[ConversationRecord],
    *,
    runtime: str,
    required: Mapping[str, str],
    grace_seconds: float,
    now: float | None = None,
) -> list[OrphanSandbox]:
    """The sweep's orphans among ``listed``: conversation sandboxes (they carry a conversation
    key) with every tag of ``required`` at exactly its value, that no record of ``records``
    names (whichever conversation's tags they carry), older than ``grace_seconds``. A private
    sandbox (no conversation key) is never one here: its runtime removes it at close."""
    recorded = {record.sandbox_id for record in records if record.sandbox_id}
    moment = time.time() if now is None else now
    found: list[OrphanSandbox] = []
    for item in listed:
        if not item.sandbox_id or not tags_match(item.tags, required):
            continue
        if item.tags.get(TAG_CONVERSATION_KEY) is None or item.sandbox_id in recorded:
            continue
        if item.created_at is not None and moment - item.created_at < grace_seconds:
            continue
        found.append(
            OrphanSandbox(
                runtime=runtime,
                sandbox_id=item.sandbox_id,
                conversation_id=item.tags.get(TAG_CONVERSATION_ID),
                created_at=datetime.fromtimestamp(item.created_at, UTC)
                if item.created_at is not None
                else None,
            )
        )
    return found


@dataclass(frozen=True)
class AcquiredSandbox(Generic[H]):
    """The outcome of :meth:`ConversationSandboxes.acquire`: the live handle, its id, and
    whether this call created the sandbox (``created``: nothing of the conversation is in it
    yet, unless it replaced a sandbox whose files live outside it, e.g. on a volume)."""

    handle: H
    sandbox_id: str
    created: bool
    pooled: bool = False
    """Whether the sandbox was claimed from a warm pool (created ahead, nothing of the
    conversation in it yet: the runtime personalises it as it would a cold one)."""


class SandboxDriver(Protocol[H]):
    """What a container platform implements for :class:`ConversationSandboxes` (``H`` is the
    driver's handle on one live sandbox: a client object, or just the id).

    Every call may raise the platform's own error (a subclass of
    :class:`~skillruntime.core.errors.SkillRuntimeError` is expected); the lifecycle lets it
    through unchanged, after cleaning up what it created.
    """

    retags: bool
    """Whether :meth:`tag` can change a sandbox's tags after creation (see the module docs)."""

    def create(self, tags: Mapping[str, str]) -> H:
        """A new running sandbox carrying ``tags`` (and the deployment's own)."""
        ...

    def connect(self, sandbox_id: str) -> H | None:
        """A handle on the live sandbox ``sandbox_id``, started or renewed as the platform
        needs; ``None`` when it is gone, has ended, or does not carry the conversation's tags
        (it will be replaced; an ended one that carries them is the driver's to remove). Raise
        when the platform cannot tell (unreachable): the record is left alone."""
        ...

    def kill(self, sandbox_id: str) -> None:
        """Remove the sandbox (and nothing else of the conversation); a sandbox already gone is
        no error. A driver may refuse, with a warning, one that lacks its deployment's tags."""
        ...

    def list_tagged(
        self, tags: Mapping[str, str], *, older_than: float = 0.0
    ) -> Iterable[TaggedSandbox]:
        """The sandboxes the platform finds for ``tags``. Both filters may be applied loosely
        (the caller checks every tag and the age again): ``tags`` by the platform's own filter,
        ``older_than`` (seconds) by leaving out sandboxes the driver knows to be younger — a
        driver whose sandboxes all mount storage created less than ``older_than`` ago may
        answer without asking the platform."""
        ...

    def tag(self, sandbox_id: str, tags: Mapping[str, str]) -> None:
        """Add or change tags of a sandbox (only called when :attr:`retags` is true)."""
        ...

    def identify(self, handle: H) -> str:
        """The id of the sandbox ``handle`` is on."""
        ...

    def release(self, handle: H) -> None:
        """Close the local handle (the sandbox runs on); must not raise."""
        ...


@runtime_checkable
class StorageDriver(Protocol):
    """The optional storage hook of a :class:`SandboxDriver` whose sandboxes can keep their
    persistent storage somewhere other than the conversation's default (a warm-pool member's
    own volume)."""

    def use_storage(self, storage: str | None) -> None:
        """From now on, the conversation's storage is ``storage`` (``None``: the default):
        create, connect and kill accept and use what lives there."""
        ...


@dataclass(frozen=True)
class PooledSandbox(Generic[H]):
    """A warm-pool member claimed for a conversation: the handle, its id and where its
    persistent storage lives (recorded as the record's ``sandbox_storage``)."""

    handle: H
    sandbox_id: str
    storage: str | None


class SandboxPool(Protocol[H]):
    """Sandboxes created ahead for a deployment (docs/docker-runtime.md, "Warm pools").

    :meth:`claim` is atomic across nodes (two claimers never get one member); what it hands out
    is settled by exactly one of :meth:`recorded` (a record names it now: it left the pool for
    good) or :meth:`give_back` (no record names it: it returns to the pool, or is removed)."""

    def claim(self, owner: str) -> PooledSandbox[H] | None:
        """A member claimed for ``owner`` (the conversation's storage key); ``None`` on a miss."""
        ...

    def recorded(self, claimed: PooledSandbox[H]) -> None:
        """``claimed`` is named by a conversation record: never hand it out again."""
        ...

    def give_back(self, claimed: PooledSandbox[H]) -> None:
        """``claimed`` was not recorded: make it claimable again (or remove it)."""
        ...


class ConversationSandboxes(Generic[H]):
    """A conversation's sandbox (or a private one) over a :class:`SandboxDriver`; see the module
    docs for the rules.

    ``binding`` is the conversation's record (``None``: a private sandbox, created on first use
    and killed by :meth:`kill_private`). ``tags`` are the tags of every sandbox this runtime
    creates (deployment tags, runtime, conversation key and id); the role is added here.
    ``error`` is the exception type raised when the record keeps changing; ``audit_fields``
    returns the fields of the ``sandbox.replace`` audit event. ``pool`` (optional) hands out
    a conversation's first sandbox ahead of the cold create (audited as ``pool.claim``).
    """

    def __init__(
        self,
        driver: SandboxDriver[H],
        *,
        binding: ConversationBinding | None,
        tags: Mapping[str, str],
        orphan_grace_seconds: float = DEFAULT_ORPHAN_GRACE_SECONDS,
        error: Callable[[str], Exception] = SkillRuntimeError,
        audit_fields: Callable[[], dict[str, Any]] = dict,
        pool: SandboxPool[H] | None = None,
    ) -> None:
        if orphan_grace_seconds < 0:
            raise ValueError("orphan_grace_seconds must not be negative")
        self.driver = driver
        self.binding = binding
        self.orphan_grace_seconds = orphan_grace_seconds
        self._error = error
        self._audit_fields = audit_fields
        self.pool = pool
        self._record: ConversationRecord | None = None
        role = ROLE_PRIVATE
        if binding is not None:
            role = ROLE_CANDIDATE if driver.retags else ROLE_CONVERSATION
        self.creation_tags: dict[str, str] = {**tags, TAG_ROLE: role}
        """The tags a new sandbox carries (and an orphan must carry)."""

    # ----------------------------------------------------------------- record

    @property
    def record(self) -> ConversationRecord | None:
        """The conversation record as last read or written here."""
        return self._record

    @record.setter
    def record(self, value: ConversationRecord | None) -> None:
        self._record = value

    # ----------------------------------------------------------------- attach

    def acquire(self) -> AcquiredSandbox[H]:
        """The sandbox to use: a new private one, or the conversation's (attached, created or
        replaced; orphans killed afterwards, which never fails the attach)."""
        binding = self.binding
        if binding is None:
            handle = self.driver.create(self.creation_tags)
            return AcquiredSandbox(handle, self._id(handle), created=True)
        for _ in range(ACQUIRE_ATTEMPTS):
            record = binding.load()
            if record is None:
                acquired = self._create_recorded(binding)
                if acquired is not None:
                    return self._attached(acquired, adopted=True)
                continue
            self._use_storage(record)
            if record.sandbox_id is not None:
                found = self.driver.connect(record.sandbox_id)
                if found is not None:
                    self._record = record
                    return self._attached(
                        AcquiredSandbox(found, record.sandbox_id, created=False), adopted=False
                    )
                logger.warning(
                    "sandbox %s of conversation %s is gone; replacing it",
                    record.sandbox_id,
                    binding.conversation_id,
                )
            replaced = self.replace(record.sandbox_id)
            if replaced is not None:
                return replaced
        raise self._error(
            f"the record of conversation {binding.conversation_id} kept changing while attaching "
            f"to its sandbox ({ACQUIRE_ATTEMPTS} attempts)"
        )

    def replace(self, old_id: str | None) -> AcquiredSandbox[H] | None:
        """Create a sandbox and swap it into the record if the record still names ``old_id``
        (audited as ``sandbox.replace``); ``None`` when another node replaced it first (its
        sandbox is used on the next attempt)."""
        binding = self.binding
        if binding is None:
            raise self._error("only a conversation's sandbox is replaced")
        with audited("sandbox.replace", **self._audit_fields()) as audit:
            candidate = self.driver.create(self.creation_tags)
            candidate_id = self._id(candidate)
            try:
                updated = binding.replace_sandbox(old_id, candidate_id)
                won = False
                if updated is None:  # the record was deleted meanwhile: start a new one
                    if binding.create(candidate_id) or binding.names(candidate_id):
                        self._record = binding.load()
                        won = True
                elif updated.sandbox_id == candidate_id:
                    self._record = updated
                    won = True
            except BaseException:
                self._discard_unless_recorded(candidate, candidate_id)
                raise
            if not won:
                self._discard(candidate, candidate_id)
                return None
            audit.sandbox_id = candidate_id
        return self._attached(AcquiredSandbox(candidate, candidate_id, created=True), adopted=True)

    def _claim_recorded(
        self, binding: ConversationBinding, pool: SandboxPool[H]
    ) -> AcquiredSandbox[H] | bool:
        """A pool member claimed and recorded as the conversation's first sandbox; ``False`` on
        a pool miss, ``True`` when another node recorded its own first (the member goes back)."""
        with audited("pool.claim", **self._audit_fields()) as audit:
            claimed = pool.claim(binding.storage_key)
            if claimed is None:
                return False
            audit.sandbox_id = claimed.sandbox_id
        member_id = claimed.sandbox_id
        try:
            won = binding.create(member_id, sandbox_storage=claimed.storage) or binding.names(
                member_id
            )
        except BaseException:
            try:
                kept = binding.names(member_id)
            except Exception:
                logger.warning("cannot tell whether member %s was recorded", member_id)
                kept = True  # it may be named: never hand it out again (the sweep reaps it)
            (pool.recorded if kept else pool.give_back)(claimed)
            raise
        if not won:
            pool.give_back(claimed)
            return True
        pool.recorded(claimed)
        self._use_storage_name(claimed.storage)
        try:
            self._record = binding.load()
        except BaseException:
            self.driver.release(claimed.handle)
            raise
        logger.info(
            "conversation %s now uses pooled sandbox %s", binding.conversation_id, member_id
        )
        return AcquiredSandbox(claimed.handle, member_id, created=True, pooled=True)

    def _create_recorded(self, binding: ConversationBinding) -> AcquiredSandbox[H] | None:
        """A pool member (when a pool has one) or a new candidate, recorded as the
        conversation's first sandbox; ``None`` when another node recorded its own first (the
        member goes back to the pool, the candidate is killed)."""
        if self.pool is not None:
            pooled = self._claim_recorded(binding, self.pool)
            if pooled is True:
                return None
            if pooled is not False:
                return pooled
        candidate = self.driver.create(self.creation_tags)
        candidate_id = self._id(candidate)
        try:
            won = binding.create(candidate_id) or binding.names(candidate_id)
        except BaseException:
            self._discard_unless_recorded(candidate, candidate_id)
            raise
        if not won:
            self._discard(candidate, candidate_id)
            return None
        try:
            self._record = binding.load()
        except BaseException:
            self.driver.release(candidate)  # recorded: the sandbox stays
            raise
        logger.info("conversation %s now uses sandbox %s", binding.conversation_id, candidate_id)
        return AcquiredSandbox(candidate, candidate_id, created=True)

    def _attached(self, acquired: AcquiredSandbox[H], *, adopted: bool) -> AcquiredSandbox[H]:
        """Finish attaching the recorded sandbox: tag it as the conversation's when this call
        recorded it (platforms that retag), then kill orphans (not after a pool claim). Neither
        step fails the attach."""
        if adopted and self.driver.retags:
            tags = {TAG_ROLE: ROLE_CONVERSATION}
            if acquired.pooled:  # a member carries the pool's tags: it becomes the conversation's
                tags = {**self.creation_tags, **tags}
            try:
                self.driver.tag(acquired.sandbox_id, tags)
            except Exception:
                logger.warning(
                    "tagging sandbox %s as recorded failed", acquired.sandbox_id, exc_info=True
                )
        if acquired.pooled:
            # A conversation that started from the pool has just been recorded; a candidate a
            # crashed node left for it is found by the next attach or the sweep.
            return acquired
        try:
            self.kill_orphans(acquired.sandbox_id)
        except Exception:
            logger.warning("looking for orphaned sandboxes failed", exc_info=True)
        return acquired

    # ---------------------------------------------------------------- orphans

    def kill_orphans(self, recorded_id: str) -> list[str]:
        """Kill the conversation's sandboxes that no record names, older than the grace (see
        the module docs); returns the ids killed."""
        binding = self.binding
        if binding is None:
            return []
        required = self.creation_tags
        now = time.time()
        stale = []
        for found in self.driver.list_tagged(required, older_than=self.orphan_grace_seconds):
            if not found.sandbox_id or found.sandbox_id == recorded_id:
                continue
            if not tags_match(found.tags, required):
                continue
            if found.created_at is not None and now - found.created_at < self.orphan_grace_seconds:
                continue
            stale.append(found.sandbox_id)
        if not stale:
            return []
        recorded = recorded_sandbox_ids(binding.store)
        killed = []
        for sandbox_id in stale:
            record = binding.load()
            if record is not None and record.sandbox_id == sandbox_id:
                continue
            if recorded is None or sandbox_id in recorded:
                logger.warning(
                    "not killing sandbox %s of conversation %s: %s",
                    sandbox_id,
                    binding.conversation_id,
                    "the store cannot list its records"
                    if recorded is None
                    else "a conversation record names it",
                )
                continue
            logger.warning(
                "killing orphaned sandbox %s of conversation %s",
                sandbox_id,
                binding.conversation_id,
            )
            self.driver.kill(sandbox_id)
            killed.append(sandbox_id)
        return killed

    # ---------------------------------------------------------------- destroy

    def destroy(self, local_id: str | None = None) -> ConversationRecord | None:
        """End the conversation: delete its record first, then kill the sandbox it named and
        ``local_id`` (the runtime's own handle's sandbox) when different. Returns the deleted
        record (``None`` when there was none)."""
        binding = self.binding
        if binding is None:
            raise self._error("destroying a conversation needs a conversation_id")
        removed = binding.delete()
        self._record = None
        if removed is not None:
            self._use_storage(removed)
        ids = []
        if removed is not None and removed.sandbox_id:
            ids.append(removed.sandbox_id)
        if local_id is not None and local_id not in ids:
            ids.append(local_id)
        for sandbox_id in ids:
            self.driver.kill(sandbox_id)
        return removed

    # ---------------------------------------------------------------- helpers

    def _id(self, handle: H) -> str:
        return self.driver.identify(handle)

    def _use_storage(self, record: ConversationRecord) -> None:
        """Point the driver at the storage ``record`` names (drivers with the hook only)."""
        self._use_storage_name(record.sandbox_storage)

    def _use_storage_name(self, storage: str | None) -> None:
        if isinstance(self.driver, StorageDriver):
            self.driver.use_storage(storage)

    def _discard(self, candidate: H, candidate_id: str) -> None:
        """Kill a losing candidate and release its handle."""
        try:
            self.driver.kill(candidate_id)
        except Exception:
            logger.warning(
                "killing losing candidate sandbox %s failed", candidate_id, exc_info=True
            )
        finally:
            self.driver.release(candidate)

    def _discard_unless_recorded(self, candidate: H, candidate_id: str) -> None:
        """After a failed record write: kill ``candidate`` unless the record names it after all
        (killing a recorded one would leave the conversation on a dead sandbox)."""
        assert self.binding is not None
        try:
            kept = self.binding.names(candidate_id)
        except Exception:
            logger.warning(
                "cannot tell whether candidate sandbox %s was recorded; killing it",
                candidate_id,
                exc_info=True,
            )
            kept = False
        if kept:
            logger.warning(
                "the record names sandbox %s although writing it failed; keeping the sandbox",
                candidate_id,
            )
            self.driver.release(candidate)
            return
        self._discard(candidate, candidate_id)
