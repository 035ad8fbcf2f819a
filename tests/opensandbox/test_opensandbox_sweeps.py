"""Exclusive conversations and expiry sweeps of OpenSandbox conversations on the double."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import sweep_conversations
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.local import LocalWorkspaceReaper
from skillruntime.opensandbox import OpenSandboxSkillRuntime
from skillruntime.opensandbox.sweeping import OpenSandboxReaper
from sql_databases import temporary_database

OLD = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlConversationStore]:
    if request.param == "sqlite":
        opened = SqlConversationStore(f"sqlite:///{tmp_path / 'c.db'}", create_schema=True)
        with opened:
            yield opened
        return
    with temporary_database(request.param) as url:
        opened = SqlConversationStore(url, create_schema=True)
        with opened:
            yield opened


SUITE = {"suite": f"sweeps-{uuid.uuid4().hex[:8]}"}
"""Tags the sandboxes of this module, so sweeps leave other tests' sandboxes on the double."""


def _runtime(
    double: OpenSandboxDouble, store: ConversationStore, conversation_id: str, **options: Any
) -> OpenSandboxSkillRuntime:
    return OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=conversation_id,
        conversation_store=store,
        metadata=SUITE,
        **options,
    )


def _backdate(store: SqlConversationStore, key: str) -> None:
    table = store._table
    with store._engine.begin() as connection:
        connection.execute(update(table).where(table.c.storage_key == key).values(updated_at=OLD))


def _tagged(double: OpenSandboxDouble, conversations: set[str]) -> set[str]:
    """Live sandboxes the runtime tagged with one of ``conversations``."""
    return {
        item["id"]
        for item in double.sandboxes()
        if (item.get("metadata") or {}).get("skillruntime-conversation-id") in conversations
    }


def _reaper(double: OpenSandboxDouble) -> OpenSandboxReaper:
    return OpenSandboxReaper(
        domain=double.domain, api_key=double.api_key, orphan_grace_seconds=0, metadata=SUITE
    )


def test_sweep_kills_idle_sandboxes_and_orphans_and_leaks_nothing(
    opensandbox_double: OpenSandboxDouble, store: SqlConversationStore
) -> None:
    prefix = uuid.uuid4().hex[:8]
    idle, active, orphaned = f"idle-{prefix}", f"active-{prefix}", f"orphan-{prefix}"
    keys: dict[str, str] = {}
    for conversation in (idle, active, orphaned):
        with _runtime(opensandbox_double, store, conversation) as runtime:
            runtime.execute(SkillExecutionRequest(command="echo hi > note.txt"))
            key = runtime.conversation_record_key
            assert key is not None
            keys[conversation] = key
    _backdate(store, keys[idle])
    # A process that died after creating its sandbox but before recording it leaves an orphan.
    assert store.delete(keys[orphaned]) is not None
    ours = {idle, active, orphaned}
    assert len(_tagged(opensandbox_double, ours)) == 3
    reaper = _reaper(opensandbox_double)
    try:
        report = sweep_conversations(store, 3600, [reaper, LocalWorkspaceReaper()], dry_run=True)
        assert report.destroyed == 1
        assert {orphan.conversation_id for orphan in report.orphans} >= {orphaned}
        assert len(_tagged(opensandbox_double, ours)) == 3  # a dry run kills nothing
        report = sweep_conversations(
            store, 3600, [reaper, LocalWorkspaceReaper()], orphans="destroy"
        )
    finally:
        reaper.close()
    outcome = {item.conversation_id: item for item in report.outcomes}
    assert outcome[idle].action == "destroyed"
    assert outcome[active].action == "kept"
    assert orphaned in {orphan.conversation_id for orphan in report.orphans}
    assert report.orphans_destroyed == report.orphans_found
    assert all(orphan.conversation_id in ours for orphan in report.orphans)
    # Leak check: every live sandbox of these conversations is named by a record.
    left = _tagged(opensandbox_double, ours)
    named = {record.sandbox_id for record in store.list_records(limit=1000)}
    assert left
    assert left <= named
    assert store.get(keys[idle]) is None
    with _runtime(opensandbox_double, store, active) as runtime:
        runtime.destroy_conversation_sandbox()
    assert _tagged(opensandbox_double, ours) == set()


def test_an_idle_conversation_in_use_keeps_its_sandbox(
    opensandbox_double: OpenSandboxDouble, store: SqlConversationStore
) -> None:
    conversation = f"busy-{uuid.uuid4().hex[:8]}"
    with _runtime(
        opensandbox_double, store, conversation, exclusive=True, lease_ttl_seconds=3.0
    ) as runtime:
        runtime.execute(SkillExecutionRequest(command="true"))
        key = runtime.conversation_record_key
        assert key is not None
        _backdate(store, key)
        reaper = _reaper(opensandbox_double)
        try:
            with runtime.exclusive_session():
                report = sweep_conversations(store, 60, [reaper], orphans="ignore")
                assert runtime.execute(SkillExecutionRequest(command="echo ok")).stdout == "ok\n"
        finally:
            reaper.close()
        assert [
            item.reason for item in report.outcomes if item.conversation_id == conversation
        ] == ["leased"]
        runtime.destroy_conversation_sandbox()


def test_exclusive_runtimes_of_one_conversation_take_turns(
    opensandbox_double: OpenSandboxDouble, store: SqlConversationStore
) -> None:
    conversation = f"turns-{uuid.uuid4().hex[:8]}"
    runtimes = [
        _runtime(
            opensandbox_double,
            store,
            conversation,
            exclusive=True,
            lease_ttl_seconds=3.0,
            lease_wait_seconds=120.0,
        )
        for _ in range(4)
    ]
    command = (
        "if ! mkdir busy 2>/dev/null; then echo OVERLAP >> log; fi; "
        "echo run >> log; sleep 0.02; rmdir busy"
    )
    errors: list[BaseException] = []

    def hammer(runtime: OpenSandboxSkillRuntime) -> None:
        try:
            for _ in range(3):
                runtime.execute(SkillExecutionRequest(command=command))
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=hammer, args=(runtime,)) for runtime in runtimes]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
        assert errors == []
        log = runtimes[0].get_file_system().read_text("log").splitlines()
        assert log == ["run"] * 12
    finally:
        runtimes[0].destroy_conversation_sandbox()
        for runtime in runtimes:
            runtime.close()


def test_a_reaper_without_a_configured_server_fails_at_once_saying_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No domain anywhere: the SDK's default server is tried once (no retry budget) and the
    failure names the settings, instead of retrying a server nobody configured."""
    from skillruntime.opensandbox.errors import OpenSandboxError
    from skillruntime.opensandbox.sweeping import OpenSandboxReaper

    monkeypatch.delenv("OPEN_SANDBOX_DOMAIN", raising=False)
    monkeypatch.delenv("SKILLRUNTIME_OPENSANDBOX_DOMAIN", raising=False)
    calls: list[float] = []
    import skillruntime.opensandbox.sandbox as sandbox_module

    real = sandbox_module.call_idempotent

    def counting(call, *, budget_seconds, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(budget_seconds)
        return real(call, budget_seconds=budget_seconds, **kwargs)

    monkeypatch.setattr(sandbox_module, "call_idempotent", counting)
    reaper = OpenSandboxReaper(domain=None, request_timeout_seconds=2)
    try:
        with pytest.raises(OpenSandboxError, match="no OpenSandbox server is configured"):
            reaper.orphans([])
    finally:
        reaper.close()
    assert calls == [0.0]
