"""The SQL conversation store behind a faulty network (PostgreSQL and MariaDB).

A :class:`~faults.tcp_proxy.FaultProxy` sits between the store and the database server and
resets, refuses, blackholes or delays connections, also right after a COMMIT. Every call must
end within the store's documented ``call_timeout``: a test that hung would be stopped by the
suite's timeout, so returning at all is the proof; the durations go to the figures report.
Writes reported as successful must all be in the final record, none applied twice.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from sqlalchemy.engine import make_url

from faults.figures import record_figure
from faults.tcp_proxy import FaultProxy
from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStoreError,
    modify_record,
)
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.errors import StoreConflictError

KINDS = ["postgresql", "mariadb"]
CONNECT_TIMEOUT = 1.0
STATEMENT_TIMEOUT = 2.0
FAULTS = int(os.environ.get("SKILLRUNTIME_FAULTS", "8"))
"""Network faults the workload injects per database (the stress run uses 45)."""
T = TypeVar("T")


@pytest.fixture(params=KINDS)
def database(request: pytest.FixtureRequest) -> tuple[str, str]:
    """``(kind, url)`` of a session database on the local server."""
    kind = str(request.param)
    return kind, str(request.getfixturevalue(f"{kind}_url"))


@pytest.fixture
def table(database: tuple[str, str]) -> str:
    name = f"faults_{uuid.uuid4().hex[:12]}"
    SqlConversationStore(database[1], table_name=name, create_schema=True).close()
    return name


@pytest.fixture
def proxy(database: tuple[str, str]) -> Iterator[FaultProxy]:
    port = make_url(database[1]).port
    assert port is not None
    with FaultProxy(port) as running:
        yield running


@pytest.fixture
def store(
    database: tuple[str, str], proxy: FaultProxy, table: str
) -> Iterator[SqlConversationStore]:
    url = make_url(database[1]).set(port=proxy.port)
    opened = SqlConversationStore(
        url,
        table_name=table,
        connect_timeout=CONNECT_TIMEOUT,
        statement_timeout=STATEMENT_TIMEOUT,
    )
    yield opened
    opened.close()


def _record(conversation: str = "conv") -> ConversationRecord:
    return ConversationRecord.new(
        service_key="http://sandbox.test",
        conversation_id=f"{conversation}-{uuid.uuid4().hex[:8]}",
        runtime="opensandbox",
        workspace_root="/workspace/conversations",
        sandbox_id="sandbox-1",
    )


def _timed(call: Callable[[], T]) -> tuple[T | BaseException, float]:
    started = time.monotonic()
    try:
        outcome: T | BaseException = call()
    except (ConversationStoreError, StoreConflictError) as error:
        outcome = error
    return outcome, time.monotonic() - started


def _add_skill(digest: str) -> Callable[[ConversationRecord], ConversationRecord | None]:
    def change(current: ConversationRecord) -> ConversationRecord | None:
        if digest in current.prepared_skills:
            return None
        return current.with_prepared_skill(digest, f"/skills/{digest}")

    return change


def _bound(store: SqlConversationStore) -> float:
    assert store.call_timeout is not None
    return store.call_timeout


# ------------------------------------------------------------------ single faults


def test_a_silent_network_under_a_pooled_connection_ends_the_call_at_its_deadline(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore
) -> None:
    record = _record()
    assert store.create(record)
    assert store.get(record.storage_key) is not None  # the pool holds a live connection now
    proxy.set_mode("blackhole")
    outcome, took = _timed(lambda: store.get(record.storage_key))
    assert isinstance(outcome, ConversationStoreError)
    assert "deadline" in str(outcome)
    record_figure("pooled blackhole: get", kind=database[0], seconds=took, bound=_bound(store))
    proxy.set_mode("pass")
    assert store.get(record.storage_key) == store.get(record.storage_key)


def test_a_server_that_accepts_and_never_answers_fails_after_the_connect_timeout(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore
) -> None:
    proxy.set_mode("blackhole")
    outcome, took = _timed(lambda: store.get(_record().storage_key))
    assert isinstance(outcome, ConversationStoreError)
    record_figure(
        "accepted but silent: first connect",
        kind=database[0],
        seconds=took,
        bound=_bound(store),
        connect_timeout=CONNECT_TIMEOUT,
    )
    proxy.set_mode("pass")
    assert store.get(_record().storage_key) is None


def test_a_pooled_connection_whose_server_goes_silent_reconnects_within_the_deadline(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore
) -> None:
    record = _record()
    assert store.create(record)
    proxy.set_mode("blackhole")
    outcome, took = _timed(lambda: store.update(record))
    assert isinstance(outcome, ConversationStoreError)
    record_figure("pooled blackhole: update", kind=database[0], seconds=took, bound=_bound(store))
    proxy.set_mode("pass")
    stored = store.get(record.storage_key)
    assert stored is not None
    assert stored.version == 1  # the silent update never reached the server


@pytest.mark.parametrize("mode", ["reset", "refuse"])
def test_reset_and_refused_connections_fail_fast_and_the_pool_recovers(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore, mode: str
) -> None:
    record = _record()
    assert store.create(record)
    proxy.set_mode(mode)
    outcome, took = _timed(lambda: store.get(record.storage_key))
    assert isinstance(outcome, ConversationStoreError)
    assert "password" not in str(outcome).lower()
    record_figure(f"{mode}: get", kind=database[0], seconds=took, bound=_bound(store))
    proxy.set_mode("pass")
    assert store.get(record.storage_key) is not None


def test_a_slow_network_below_the_bounds_only_slows_calls_down(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore
) -> None:
    record = _record()
    assert store.create(record)
    proxy.set_mode("delay", delay=0.05)
    updated, took = _timed(lambda: modify_record(store, record.storage_key, _add_skill("slow")))
    assert isinstance(updated, ConversationRecord)
    assert dict(updated.prepared_skills) == {"slow": "/skills/slow"}
    record_figure("delay 50 ms: modify_record", kind=database[0], seconds=took, bound=_bound(store))


@pytest.mark.parametrize("kind", ["reset", "blackhole"])
def test_an_update_whose_commit_answer_is_lost_is_reported_as_landed(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore, kind: str
) -> None:
    record = _record()
    assert store.create(record)
    proxy.fail_after_commit(kind)
    updated, took = _timed(lambda: modify_record(store, record.storage_key, _add_skill("landed")))
    assert proxy.pending_commit_faults() == 0
    assert isinstance(updated, ConversationRecord), updated
    assert dict(updated.prepared_skills) == {"landed": "/skills/landed"}
    stored = store.get(record.storage_key)
    assert stored is not None
    assert stored.version == 2  # applied exactly once
    record_figure(
        f"commit answer lost ({kind}): modify_record",
        kind=database[0],
        seconds=took,
        bound=2 * _bound(store),
    )


# --------------------------------------------------------------- a faulty workload


def test_a_workload_under_random_network_faults_loses_and_duplicates_nothing(
    database: tuple[str, str], proxy: FaultProxy, store: SqlConversationStore
) -> None:
    """Writers add distinct skills to shared records while ``FAULTS`` network faults hit them."""
    records = [_record(f"load{index}") for index in range(3)]
    for record in records:
        assert store.create(record)
    rng = random.Random(1234)
    reported: dict[str, set[str]] = {record.storage_key: set() for record in records}
    failed = 0
    slowest = 0.0
    lock = threading.Lock()
    stop = threading.Event()
    counter = iter(range(10**9))
    operations = 0

    def writer() -> None:
        nonlocal failed, slowest, operations
        pace = random.Random()
        for number in counter:
            if stop.wait(pace.uniform(0.0, 0.01)):
                return
            key = records[number % len(records)].storage_key
            digest = f"d{number:05d}"
            change = _add_skill(digest)
            outcome, took = _timed(
                lambda key=key, change=change: modify_record(store, key, change)  # type: ignore[misc]
            )
            with lock:
                operations += 1
                slowest = max(slowest, took)
                if isinstance(outcome, ConversationRecord):
                    reported[key].add(digest)
                else:
                    failed += 1

    def injector() -> None:
        try:
            while proxy.faults < FAULTS:
                time.sleep(rng.uniform(0.1, 0.4))
                fault = rng.choice(
                    ["reset", "refuse", "blackhole", "delay", "commit-reset", "commit-blackhole"]
                )
                if fault.startswith("commit-"):
                    proxy.fail_after_commit(fault.removeprefix("commit-"))
                    for _ in range(200):  # the writers commit many times a second
                        if not proxy.pending_commit_faults():
                            break
                        time.sleep(0.05)
                    continue
                proxy.set_mode(fault, delay=0.02)
                time.sleep(rng.uniform(0.05, 0.5))
                proxy.set_mode("pass")
            time.sleep(0.5)  # let the writers work on a healthy network again
        finally:
            stop.set()

    writers = [threading.Thread(target=writer) for _ in range(3)]
    chaos = threading.Thread(target=injector)
    chaos.start()
    for thread in writers:
        thread.start()
    chaos.join(timeout=900)
    for thread in writers:
        thread.join(timeout=120)
    proxy.set_mode("pass")
    assert not any(thread.is_alive() for thread in writers)
    lost = 0
    duplicated = 0
    for record in records:
        final = store.get(record.storage_key)
        assert final is not None
        lost += len(reported[record.storage_key] - set(final.prepared_skills))
        # every write adds one skill: more versions than skills means a write applied twice
        duplicated += final.version - 1 - len(final.prepared_skills)
    record_figure(
        "workload under random faults",
        kind=database[0],
        operations=operations,
        failed=failed,
        faults=proxy.faults,
        lost=lost,
        duplicated=duplicated,
        seconds=slowest,
        bound=2 * _bound(store),
    )
    assert lost == 0
    assert duplicated == 0
    assert proxy.faults > 0
