"""Conversation leases on every store: compare-and-set takeover, renewal, release, keepers."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from conversations.conversation_backends import Backend, SqlBackend, new_record
from skillruntime.core.conversations import ConversationStoreError
from skillruntime.core.conversations.leases import (
    ConversationLease,
    LeaseKeeper,
    LeaseLostError,
    LeaseTimeoutError,
)
from skillruntime.core.conversations.sql import SqlConversationStore, schema_ddl

KEY = "a" * 64


def test_first_acquire_wins_and_others_wait(backend: Backend) -> None:
    store, other = backend.open(), backend.open()
    lease = store.acquire_lease(KEY, "node-a", 30)
    assert lease is not None
    assert lease.owner == "node-a"
    assert lease.token == 1
    assert other.acquire_lease(KEY, "node-b", 30) is None
    again = other.acquire_lease(KEY, "node-a", 30)
    assert again is not None
    assert again.token == 1
    stored = other.get_lease(KEY)
    assert stored is not None
    assert stored.held_by("node-a")


def test_expired_lease_is_taken_over_and_the_old_holder_is_fenced(backend: Backend) -> None:
    store, other = backend.open(), backend.open()
    old = store.acquire_lease(KEY, "node-a", 0.3)
    assert old is not None
    time.sleep(0.5)
    new = other.acquire_lease(KEY, "node-b", 30)
    assert new is not None
    assert new.owner == "node-b"
    assert new.token == old.token + 1
    assert store.renew_lease(old, 30) is None
    assert store.release_lease(old) is False
    current = other.get_lease(KEY)
    assert current is not None
    assert current.held_by("node-b")


def test_renew_extends_and_release_frees(backend: Backend) -> None:
    store, other = backend.open(), backend.open()
    lease = store.acquire_lease(KEY, "node-a", 0.5)
    assert lease is not None
    renewed = store.renew_lease(lease, 30)
    assert renewed is not None
    assert renewed.expires_at > lease.expires_at
    time.sleep(0.7)
    assert other.acquire_lease(KEY, "node-b", 30) is None  # renewed past the first TTL
    assert store.release_lease(renewed) is True
    taken = other.acquire_lease(KEY, "node-b", 30)
    assert taken is not None
    assert taken.token == 2
    released = other.get_lease(KEY)
    assert released is not None
    assert not released.expired()


def test_racing_acquirers_get_exactly_one_lease(backend: Backend) -> None:
    count = 6
    stores = [backend.open() for _ in range(count)]
    barrier = threading.Barrier(count, timeout=30)
    won: list[ConversationLease] = []

    def race(index: int) -> None:
        barrier.wait()
        lease = stores[index].acquire_lease(KEY, f"node-{index}", 30)
        if lease is not None:
            won.append(lease)

    threads = [threading.Thread(target=race, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(won) == 1


@pytest.mark.parametrize(
    ("key", "owner", "ttl"), [("", "o", 1), (KEY, "", 1), (KEY, "o", 0), (KEY, "o" * 300, 1)]
)
def test_bad_arguments_are_refused(backend: Backend, key: str, owner: str, ttl: float) -> None:
    with pytest.raises(ValueError, match="lease"):
        backend.open().acquire_lease(key, owner, ttl)


def test_list_records_pages_by_key_and_delete_version_is_compare_and_set(
    backend: Backend,
) -> None:
    store = backend.open()
    records = [new_record(f"conv-{index}") for index in range(5)]
    for record in records:
        assert store.create(record)
    first = store.list_records(limit=3)
    rest = store.list_records(after=first[-1].storage_key, limit=3)
    keys = [record.storage_key for record in first + rest]
    assert keys == sorted(record.storage_key for record in records)
    target = store.get(records[0].storage_key)
    assert target is not None
    assert store.update(target.with_changes())
    assert store.delete_version(target.storage_key, target.version) is False
    assert store.delete_version(target.storage_key, target.version + 1) is True
    assert store.get(target.storage_key) is None


def test_keeper_serialises_holders_and_renews_while_held(backend: Backend) -> None:
    inside = 0
    overlaps = 0
    completed = 0
    lock = threading.Lock()

    def work(index: int) -> None:
        nonlocal inside, overlaps, completed
        keeper = LeaseKeeper(
            backend.open(), KEY, owner=f"worker-{index}", ttl_seconds=3.0, wait_seconds=60
        )
        for _ in range(3):
            with keeper.hold():
                with lock:
                    inside += 1
                    overlaps += inside > 1
                time.sleep(0.02)
                with lock:
                    inside -= 1
            with lock:
                completed += 1

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert overlaps == 0
    assert completed == 12
    # A hold longer than the TTL survives through renewals. The store is used once before, so
    # that the hold's acquire does not also open its first connection (on a loaded machine that
    # took most of a short TTL, and the validity counts from the moment the acquire was sent).
    # Renewals every 0.25 s; one may come back 2.25 s late without the lease being lost.
    store = backend.open()
    released = store.get_lease(KEY)
    assert released is None or released.owner is None  # every worker released it
    keeper = LeaseKeeper(store, KEY, ttl_seconds=2.5, renew_every_seconds=0.25)
    with keeper.hold():
        time.sleep(2.75)
        keeper.check()
        assert backend.open().acquire_lease(KEY, "intruder", 5) is None


def test_keeper_waits_with_a_bound(backend: Backend) -> None:
    holder = backend.open().acquire_lease(KEY, "holder", 30)
    assert holder is not None
    keeper = LeaseKeeper(backend.open(), KEY, ttl_seconds=5, wait_seconds=0.3)
    started = time.monotonic()
    with pytest.raises(LeaseTimeoutError, match="leased by another owner"), keeper.hold():
        pass
    assert time.monotonic() - started < 10


def test_keeper_reports_a_takeover_as_lost(backend: Backend) -> None:
    store = backend.open()
    # The TTL is ten renewal periods: the takeover must be what the first renewal finds, even
    # when a loaded machine delays it (a lease that expires first is lost for that reason).
    keeper = LeaseKeeper(store, KEY, ttl_seconds=3.0, renew_every_seconds=0.3, wait_seconds=5)

    def steal_and_wait() -> None:
        with keeper.hold():
            lease = keeper.lease
            assert lease is not None
            # Simulate a takeover: another owner releases our lease's slot and takes it.
            assert store.release_lease(lease)
            assert store.acquire_lease(KEY, "thief", 30) is not None
            deadline = time.monotonic() + 10
            while keeper.held and time.monotonic() < deadline:
                time.sleep(0.05)
            with pytest.raises(LeaseLostError):
                keeper.check()

    with pytest.raises(LeaseLostError, match="another owner took it over"):
        steal_and_wait()


def test_store_without_lease_table_names_the_fix(sql_url: str) -> None:
    store = SqlConversationStore(sql_url, table_name="old_layout")
    try:
        store.create_schema()
        with store._engine.begin() as connection:  # a database from before leases existed
            store._lease_table.drop(connection)
        with pytest.raises(ConversationStoreError, match=r"old_layout_leases.*create_schema"):
            store.acquire_lease(KEY, "node", 5)
        store.create_schema()  # the migration: creates only what is missing
        assert store.acquire_lease(KEY, "node", 5) is not None
    finally:
        store.close()


def test_ddl_includes_the_lease_table() -> None:
    ddl = schema_ddl("postgresql", "t1")
    assert "CREATE TABLE t1_leases (" in ddl
    assert "PRIMARY KEY (lease_key)" in ddl


def test_sql_lease_times_are_utc(sql_backend: SqlBackend) -> None:
    lease = sql_backend.open().acquire_lease(KEY, "node", 60)
    assert lease is not None
    stored = sql_backend.open().get_lease(KEY)
    assert stored is not None
    assert stored.expires_at.tzinfo is not None
    remaining = (stored.expires_at - datetime.now(UTC)).total_seconds()
    assert 30 < remaining <= 61
