"""Concurrent first use of one SQLite file: every store opening it at once must succeed.

Opening a connection switches the file to WAL, which needs a moment of exclusive access; stores
that open the same new file together must wait for each other within the busy timeout instead of
failing with "database is locked". ``SKILLRUNTIME_SQLITE_STRESS_RUNS`` sets how many fresh files
each test races on (default 3; the stress run uses 200).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from conversations.conversation_backends import new_record
from skillruntime.core.conversations.sql import SqlConversationStore

RUNS = int(os.environ.get("SKILLRUNTIME_SQLITE_STRESS_RUNS", "3"))
NODES = 4


def _race(url: str, work: Callable[[SqlConversationStore, int], None]) -> list[BaseException]:
    """``NODES`` stores on ``url`` start ``work`` together; returns what they raised."""
    stores = [SqlConversationStore(url) for _ in range(NODES)]
    barrier = threading.Barrier(NODES, timeout=60)
    failures: list[BaseException] = []

    def run(index: int) -> None:
        barrier.wait()
        try:
            work(stores[index], index)
        except BaseException as error:  # collected and asserted by the caller
            failures.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(NODES)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        for store in stores:
            store.close()
    return failures


@pytest.mark.parametrize("run", range(RUNS))
def test_stores_creating_the_schema_of_a_new_file_together_all_succeed(
    tmp_path: Path, run: int
) -> None:
    url = f"sqlite:///{tmp_path / f'first-use-{run}.db'}"
    assert _race(url, lambda store, _: store.create_schema()) == []
    with SqlConversationStore(url) as store:
        assert store.schema_exists()


@pytest.mark.parametrize("run", range(RUNS))
def test_stores_writing_a_new_file_together_all_succeed(tmp_path: Path, run: int) -> None:
    url = f"sqlite:///{tmp_path / f'first-write-{run}.db'}"
    SqlConversationStore(url, create_schema=True).close()  # the schema exists, WAL not yet used
    records = [new_record(f"conv-{index}") for index in range(NODES)]

    def write(store: SqlConversationStore, index: int) -> None:
        assert store.create(records[index])
        assert store.get(records[index].storage_key) is not None

    assert _race(url, write) == []
    with SqlConversationStore(url) as store:
        assert all(store.get(record.storage_key) is not None for record in records)
