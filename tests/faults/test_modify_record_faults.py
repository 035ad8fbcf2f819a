"""``modify_record`` when the store fails around a write: a landed write is never a failure."""

from __future__ import annotations

import pytest

from conversations.conversation_backends import new_record
from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStoreError,
    InMemoryConversationStore,
    modify_record,
)


class FlakyStore(InMemoryConversationStore):
    """An in-memory store whose next reads or writes fail as a lost connection would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_reads_after_update = 0
        self.update_raises: str | None = None  # "after" the write landed, or "before" it
        self._updated = False

    def get(self, storage_key: str) -> ConversationRecord | None:
        if self._updated and self.fail_reads_after_update:
            self.fail_reads_after_update -= 1
            raise ConversationStoreError("the connection was lost while reading")
        return super().get(storage_key)

    def update(self, record: ConversationRecord) -> bool:
        mode, self.update_raises = self.update_raises, None
        if mode == "before":
            raise ConversationStoreError("the connection was lost before the commit")
        won = super().update(record)
        self._updated = True
        if mode == "after":
            raise ConversationStoreError("the answer to the commit was lost")
        return won


def _add(current: ConversationRecord) -> ConversationRecord | None:
    if "digest" in current.prepared_skills:
        return None
    return current.with_prepared_skill("digest", "/skills/x")


@pytest.fixture
def store() -> FlakyStore:
    flaky = FlakyStore()
    assert flaky.create(new_record())
    return flaky


def test_a_failed_re_read_after_a_won_update_still_reports_the_write(store: FlakyStore) -> None:
    store.fail_reads_after_update = 1
    key = new_record().storage_key
    written = modify_record(store, key, _add)
    assert written is not None
    assert written.version == 2
    assert dict(written.prepared_skills) == {"digest": "/skills/x"}
    stored = store.get(key)
    assert stored is not None
    assert stored.version == 2


def test_an_update_that_raised_after_landing_is_reported_as_landed(store: FlakyStore) -> None:
    store.update_raises = "after"
    written = modify_record(store, new_record().storage_key, _add)
    assert written is not None
    assert written.version == 2
    assert dict(written.prepared_skills) == {"digest": "/skills/x"}


def test_an_update_that_raised_without_landing_raises_and_changes_nothing(
    store: FlakyStore,
) -> None:
    store.update_raises = "before"
    key = new_record().storage_key
    with pytest.raises(ConversationStoreError, match="before the commit"):
        modify_record(store, key, _add)
    stored = store.get(key)
    assert stored is not None
    assert stored.version == 1


def test_when_nothing_can_be_read_after_a_failed_update_the_error_is_raised(
    store: FlakyStore,
) -> None:
    store.update_raises = "after"
    store.fail_reads_after_update = 1
    with pytest.raises(ConversationStoreError, match="answer to the commit"):
        modify_record(store, new_record().storage_key, _add)
