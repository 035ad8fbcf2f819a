"""The warm-pool path of core's conversation-sandbox lifecycle (``ConversationSandboxes`` with a
``SandboxPool``), on the example directory driver of docs/custom-runtime.md: a hit is recorded
with its storage, a miss falls through to the cold create, the loser of the first-record race
gives its member back, a record write that fails gives it back too, and the driver's storage hook
follows the record (attach, destroy)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.binding import ConversationBinding
from skillruntime.core.conversations.sandboxes import (
    TAG_ROLE,
    ConversationSandboxes,
    PooledSandbox,
)
from skillruntime.core.errors import ConversationStoreError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "directory_driver.py"


def _driver_class() -> Any:
    spec = importlib.util.spec_from_file_location("directory_driver_pools", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.DirectoryDriver


class StorageDirectoryDriver(_driver_class()):  # type: ignore[misc]
    """The example driver with the storage hook, remembering what it was told."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.storages: list[str | None] = []

    def use_storage(self, storage: str | None) -> None:
        self.storages.append(storage)


class ListPool:
    """Members made ahead by the driver; each handed out once until given back."""

    def __init__(self, driver: Any, count: int) -> None:
        self.members = [driver.create({TAG_ROLE: "pool"}) for _ in range(count)]
        self.recorded_ids: list[str] = []
        self.given_back: list[str] = []

    def claim(self, owner: str) -> PooledSandbox[str] | None:
        if not self.members:
            return None
        member = self.members.pop(0)
        return PooledSandbox(member, member, f"volume-of-{member[:8]}")

    def recorded(self, claimed: PooledSandbox[str]) -> None:
        self.recorded_ids.append(claimed.sandbox_id)

    def give_back(self, claimed: PooledSandbox[str]) -> None:
        self.given_back.append(claimed.sandbox_id)
        self.members.append(claimed.sandbox_id)


def _node(
    driver: Any, store: InMemoryConversationStore, pool: ListPool | None
) -> ConversationSandboxes[str]:
    binding = ConversationBinding(
        store,
        service_key="svc",
        conversation_id="chat-1",
        runtime_name="dir",
        workspace_root="/w",
    )
    tags: Mapping[str, str] = {"skillruntime-conversation-key": binding.storage_key}
    return ConversationSandboxes(driver, binding=binding, tags=tags, pool=pool)


def test_a_hit_is_recorded_with_its_storage_and_the_driver_follows_the_record(
    tmp_path: Path,
) -> None:
    driver = StorageDirectoryDriver(tmp_path)
    store = InMemoryConversationStore()
    pool = ListPool(driver, 1)
    member = pool.members[0]
    acquired = _node(driver, store, pool).acquire()
    assert (acquired.sandbox_id, acquired.created, acquired.pooled) == (member, True, True)
    assert pool.recorded_ids == [member]
    record = store.list_records()[0]
    assert (record.sandbox_id, record.sandbox_storage) == (member, f"volume-of-{member[:8]}")
    # The member was retagged as the conversation's (a driver that retags).
    assert driver.list_tagged({"skillruntime-conversation-key": record.storage_key})
    # Another node attaches: the driver is told the storage before connecting.
    other = StorageDirectoryDriver(tmp_path)
    again = _node(other, store, None).acquire()
    assert (again.sandbox_id, again.created, again.pooled) == (member, False, False)
    assert other.storages == [record.sandbox_storage]
    # A miss falls through to the cold create.
    fresh = InMemoryConversationStore()
    cold = _node(driver, fresh, pool).acquire()
    assert (cold.created, cold.pooled) == (True, False)
    assert fresh.list_records()[0].sandbox_storage is None
    # Destroy points the driver at the recorded storage before the kill.
    removed = _node(other, store, None).destroy()
    assert removed is not None
    assert other.storages[-1] == removed.sandbox_storage
    assert driver.connect(member) is None


def test_the_loser_of_the_first_record_gives_its_member_back(tmp_path: Path) -> None:
    driver = StorageDirectoryDriver(tmp_path)
    store = InMemoryConversationStore()
    winner = _node(driver, store, None).acquire()  # a cold node recorded first
    pool = ListPool(driver, 1)
    node = _node(driver, store, pool)
    binding = node.binding
    assert binding is not None
    member = pool.members[0]

    original = binding.load
    calls = iter([None])

    def stale_load() -> Any:  # the first read misses the winner's record
        try:
            return next(calls)
        except StopIteration:
            return original()

    binding.load = stale_load  # type: ignore[method-assign]
    acquired = node.acquire()
    assert acquired.sandbox_id == winner.sandbox_id
    assert pool.given_back == [member]
    assert pool.recorded_ids == []
    assert driver.connect(member) == member  # given back alive, not killed


def test_a_failed_record_write_gives_the_member_back(tmp_path: Path) -> None:
    driver = StorageDirectoryDriver(tmp_path)
    store = InMemoryConversationStore()
    pool = ListPool(driver, 1)
    member = pool.members[0]
    node = _node(driver, store, pool)

    def failing_create(record: Any) -> bool:
        raise ConversationStoreError("the database went away")

    store.create = failing_create  # type: ignore[method-assign]
    with pytest.raises(ConversationStoreError):
        node.acquire()
    assert pool.given_back == [member]
    assert pool.recorded_ids == []
