"""The conversation store contract, proved against memory, SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from conversations.conversation_backends import SERVICE, Backend, new_record
from skillruntime.core.conversations import ConversationRecord, modify_record, storage_key_for
from skillruntime.core.errors import StoreConflictError


def _run_together(count: int, action: Callable[[int], object]) -> list[object]:
    """Run ``action(i)`` for ``i < count`` in threads released at the same moment."""
    barrier = threading.Barrier(count, timeout=60)

    def started(index: int) -> object:
        barrier.wait()
        return action(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(started, range(count)))


def test_get_of_an_unknown_key_is_none(backend: Backend) -> None:
    assert backend.open().get(storage_key_for(SERVICE, "never-created")) is None


def test_create_inserts_once_and_never_overwrites(backend: Backend) -> None:
    store = backend.open()
    first = new_record(sandbox_id="sandbox-first")
    assert store.create(first) is True
    assert store.create(new_record(sandbox_id="sandbox-second")) is False
    stored = store.get(first.storage_key)
    assert stored is not None
    assert stored.sandbox_id == "sandbox-first"
    assert stored.version == 1


def test_create_stores_version_one_whatever_the_record_says(backend: Backend) -> None:
    store = backend.open()
    record = new_record().with_changes(version=7)
    assert store.create(record)
    stored = store.get(record.storage_key)
    assert stored is not None
    assert stored.version == 1


def test_update_with_the_current_version_wins_and_bumps_it(backend: Backend) -> None:
    store = backend.open()
    store.create(new_record())
    current = store.get(new_record().storage_key)
    assert current is not None
    assert store.update(current.with_changes(workspace_ready=True, sandbox_id="sandbox-2"))
    stored = store.get(current.storage_key)
    assert stored is not None
    assert (stored.version, stored.workspace_ready, stored.sandbox_id) == (2, True, "sandbox-2")


def test_update_with_a_stale_version_fails_and_changes_nothing(backend: Backend) -> None:
    store = backend.open()
    store.create(new_record())
    stale = store.get(new_record().storage_key)
    assert stale is not None
    assert store.update(stale.with_prepared_skill("digest-a", "/skills/a"))
    after_first = store.get(stale.storage_key)

    assert store.update(stale.with_prepared_skill("digest-b", "/skills/b")) is False

    assert store.get(stale.storage_key) == after_first
    assert after_first is not None
    assert dict(after_first.prepared_skills) == {"digest-a": "/skills/a"}


def test_update_of_a_missing_record_fails(backend: Backend) -> None:
    store = backend.open()
    assert store.update(new_record()) is False
    assert store.get(new_record().storage_key) is None


def test_other_store_objects_see_the_same_records(backend: Backend) -> None:
    writer, reader = backend.open(), backend.open()
    writer.create(new_record())
    seen = reader.get(new_record().storage_key)
    assert seen is not None
    assert reader.update(seen.with_changes(workspace_ready=True))
    again = writer.get(seen.storage_key)
    assert again is not None
    assert again.workspace_ready
    assert again.version == 2


def test_concurrent_modify_record_keeps_every_prepared_skill(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]
    record = new_record()
    stores[0].create(record)
    count = 8

    def add_skill(index: int) -> object:
        return modify_record(
            stores[index % 2],
            record.storage_key,
            lambda current: current.with_prepared_skill(f"digest-{index}", f"/skills/{index}"),
        )

    results = _run_together(count, add_skill)

    assert all(isinstance(result, ConversationRecord) for result in results)
    stored = stores[1].get(record.storage_key)
    assert stored is not None
    assert dict(stored.prepared_skills) == {f"digest-{i}": f"/skills/{i}" for i in range(count)}
    assert stored.version == 1 + count


def test_racing_creates_have_exactly_one_winner(backend: Backend) -> None:
    stores = [backend.open() for _ in range(3)]
    count = 12
    outcomes = _run_together(
        count,
        lambda index: stores[index % 3].create(new_record(sandbox_id=f"sandbox-{index}")),
    )
    assert outcomes.count(True) == 1
    assert outcomes.count(False) == count - 1
    stored = stores[0].get(new_record().storage_key)
    assert stored is not None
    assert stored.sandbox_id == f"sandbox-{outcomes.index(True)}"
    assert stored.version == 1


def test_delete_returns_the_stored_record_then_none(backend: Backend) -> None:
    store = backend.open()
    store.create(new_record())
    current = store.get(new_record().storage_key)
    assert current is not None
    store.update(current.with_prepared_skill("digest-a", "/skills/a"))
    stored = store.get(current.storage_key)

    deleted = store.delete(current.storage_key)

    assert deleted == stored
    assert store.get(current.storage_key) is None
    assert store.delete(current.storage_key) is None
    assert store.create(new_record()) is True


def test_a_deleted_record_cannot_be_updated_or_modified(backend: Backend) -> None:
    store = backend.open()
    store.create(new_record())
    current = store.get(new_record().storage_key)
    assert current is not None
    store.delete(current.storage_key)
    assert store.update(current) is False
    assert (
        modify_record(store, current.storage_key, lambda r: r.with_changes(sandbox_id="x")) is None
    )
    assert store.get(current.storage_key) is None


def test_every_field_round_trips(backend: Backend) -> None:
    store = backend.open()
    conversation_id = "Conv_9.a-" + "x" * 119  # 128 characters, every allowed kind
    record = ConversationRecord.new(
        service_key="https://sandbox.example/Ünïcode/区域",
        conversation_id=conversation_id,
        runtime="opensandbox",
        workspace_root="/workspace/conversations/ünï 区域",
        sandbox_id="sb-" + "z" * 253,
    )
    skills = {"0" * 64: "/skills/ünï/区域", "f" * 64: "/skills/plain"}
    before = datetime.now(UTC)
    assert store.create(record)
    current = store.get(record.storage_key)
    assert current is not None
    assert store.update(current.with_changes(workspace_ready=True, prepared_skills=skills))
    after = datetime.now(UTC)

    stored = store.get(record.storage_key)

    assert stored is not None
    assert stored.model_dump(exclude={"updated_at", "version"}) == record.model_copy(
        update={"workspace_ready": True, "prepared_skills": skills}
    ).model_dump(exclude={"updated_at", "version"})
    assert stored.version == 2
    assert stored.updated_at.utcoffset() is not None
    assert before <= stored.updated_at <= after


def test_a_record_without_sandbox_round_trips(backend: Backend) -> None:
    store = backend.open()
    record = new_record(sandbox_id=None)
    assert store.create(record)
    stored = store.get(record.storage_key)
    assert stored is not None
    assert stored.sandbox_id is None
    assert dict(stored.prepared_skills) == {}
    assert stored.workspace_ready is False


def test_modify_record_gives_up_when_it_always_loses(backend: Backend) -> None:
    store, rival = backend.open(), backend.open()
    store.create(new_record())
    key = new_record().storage_key

    def change_while_a_rival_writes(current: ConversationRecord) -> ConversationRecord:
        rival_view = rival.get(key)
        assert rival_view is not None
        assert rival.update(rival_view.with_changes(sandbox_id=f"rival-{rival_view.version}"))
        return current.with_changes(workspace_ready=True)

    with pytest.raises(StoreConflictError):
        modify_record(store, key, change_while_a_rival_writes, attempts=3)
    stored = store.get(key)
    assert stored is not None
    assert stored.workspace_ready is False
    assert stored.version == 4


def test_modify_record_that_changes_nothing_keeps_the_version(backend: Backend) -> None:
    store = backend.open()
    store.create(new_record())
    key = new_record().storage_key
    result = modify_record(store, key, lambda current: None)
    assert result is not None
    assert result.version == 1


def test_modify_record_refuses_to_move_the_record(backend: Backend) -> None:
    store = backend.open()
    store.create(new_record())
    other = new_record("conv-2")
    with pytest.raises(ValueError, match="storage_key"):
        modify_record(store, new_record().storage_key, lambda current: other)
    assert store.get(other.storage_key) is None


def test_delete_racing_with_updates_returns_every_update_that_won(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]
    record = new_record()
    stores[0].create(record)
    count = 8

    def act(index: int) -> object:
        store = stores[index % 2]
        if index == count // 2:
            return store.delete(record.storage_key)
        return modify_record(
            store,
            record.storage_key,
            lambda current: current.with_prepared_skill(f"digest-{index}", f"/skills/{index}"),
        )

    outcomes = _run_together(count + 1, act)

    deleted = outcomes[count // 2]
    assert isinstance(deleted, ConversationRecord)
    won = {
        f"digest-{index}"
        for index, outcome in enumerate(outcomes)
        if index != count // 2 and outcome is not None
    }
    assert set(deleted.prepared_skills) == won
    assert deleted.version == 1 + len(won)
    assert stores[1].get(record.storage_key) is None


@pytest.mark.parametrize("conversation_id", ["ünïcode", "chat 42", "-leading-dash", "x" * 129])
def test_records_refuse_conversation_ids_outside_the_id_rules(conversation_id: str) -> None:
    with pytest.raises(ValueError, match="conversation_id"):
        new_record(conversation_id)
