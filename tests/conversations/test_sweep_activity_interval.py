"""Sweeps and the runtimes' activity interval.

A runtime refreshes a record's ``updated_at`` at most once per activity interval, and between
exclusive sessions no lease shows that a conversation is in use. A sweep with ``--idle`` shorter
than the interval used to destroy such a conversation; the sweep now counts a record as idle only
when it is older than the limit plus the interval.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conversations.conversation_backends import sqlite_url
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations import (
    ConversationStore,
    InMemoryConversationStore,
    storage_key_for,
)
from skillruntime.core.conversations.exclusive import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    local_service_key,
)
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import sweep_conversations
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import LocalSkillRuntime, LocalWorkspaceReaper


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    if request.param == "memory":
        yield InMemoryConversationStore()
        return
    opened = SqlConversationStore(sqlite_url(tmp_path), create_schema=True)
    try:
        yield opened
    finally:
        opened.close()


def _two_sessions(store: ConversationStore, root: Path) -> tuple[str, datetime]:
    """Use conversation ``busy`` in two exclusive sessions; its key and the recorded activity."""
    with LocalSkillRuntime(
        conversation_id="busy", conversations_root=root, conversation_store=store, exclusive=True
    ) as runtime:
        with runtime.exclusive_session():
            runtime.execute(SkillExecutionRequest(command="echo one > file.txt"))
        key = storage_key_for(local_service_key(str(root)), "busy")
        record = store.get(key)
        assert record is not None
        with runtime.exclusive_session():  # within the interval: no new activity write
            runtime.execute(SkillExecutionRequest(command="echo two >> file.txt"))
    after = store.get(key)
    assert after is not None
    assert after.updated_at == record.updated_at
    return key, record.updated_at


def test_a_limit_shorter_than_the_activity_interval_keeps_a_conversation_in_use(
    store: ConversationStore, tmp_path: Path
) -> None:
    key, active = _two_sessions(store, tmp_path)
    # The sweep runs 30 s after the recorded activity, with a 10 s limit: the record is older
    # than the limit, but the conversation may have been used since (the interval is 60 s).
    report = sweep_conversations(
        store, 10, [LocalWorkspaceReaper()], now=active + timedelta(seconds=30)
    )
    assert (report.kept, report.destroyed) == (1, 0)
    assert report.outcomes[0].reason == "active"
    assert (tmp_path / "busy" / "file.txt").read_text() == "one\ntwo\n"
    assert store.get(key) is not None
    assert report.as_dict()["activity_interval_seconds"] == DEFAULT_ACTIVITY_INTERVAL_SECONDS


def test_a_record_older_than_the_limit_plus_the_interval_is_idle(
    store: ConversationStore, tmp_path: Path
) -> None:
    key, active = _two_sessions(store, tmp_path)
    kept = sweep_conversations(
        store,
        10,
        [LocalWorkspaceReaper()],
        now=active + timedelta(seconds=39),
        activity_interval_seconds=30,
    )
    assert kept.kept == 1
    destroyed = sweep_conversations(
        store,
        10,
        [LocalWorkspaceReaper()],
        now=active + timedelta(seconds=41),
        activity_interval_seconds=30,
    )
    assert destroyed.destroyed == 1
    assert not (tmp_path / "busy").exists()
    assert store.get(key) is None


@pytest.mark.parametrize("interval", [0, -1.0, float("nan")])
def test_the_activity_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ValueError, match="activity interval must be positive"):
        sweep_conversations(InMemoryConversationStore(), 60, [], activity_interval_seconds=interval)


def _cli(args: list[str], url: str) -> Any:
    return CliRunner().invoke(
        build_cli(),
        ["conversations", "sweep", *args],
        env={"SKILLRUNTIME_CONVERSATION_STORE": url},
    )


def test_the_sweep_command_takes_the_activity_interval(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    store = SqlConversationStore(url, create_schema=True)
    try:
        _two_sessions(store, tmp_path / "root")
    finally:
        store.close()
    common = ["--idle", "1s", "--runtime", "local", "--json"]
    default = _cli(common, url)
    assert default.exit_code == 0, default.output
    data = json.loads(default.output)
    assert data["activity_interval_seconds"] == DEFAULT_ACTIVITY_INTERVAL_SECONDS
    assert (data["kept"], data["destroyed"]) == (1, 0)
    assert (tmp_path / "root" / "busy" / "file.txt").exists()
    bad = _cli(["--idle", "1s", "--activity-interval", "soon"], url)
    assert bad.exit_code == 2
    assert "--activity-interval" in bad.output


def test_the_report_names_the_interval_it_used() -> None:
    report = sweep_conversations(
        InMemoryConversationStore(), timedelta(minutes=5), [], activity_interval_seconds=90
    )
    assert report.activity_interval == timedelta(seconds=90)
    assert report.as_dict()["activity_interval_seconds"] == 90
